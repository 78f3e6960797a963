// Package quota counts what named gateway keys spend, requests and tokens,
// against their rate limits and token budgets. It knows key
// names only, never a key's secret, and nothing of HTTP: the handler asks
// Admit before a request, settles the ticket when the answer ends, and turns
// the Decision into a 429 and OpenAI's x-ratelimit-* headers.
//
// # The model
//
// A limit is N per fixed window ("60/m", "200k/d", "1.5M/mo"); windows are
// aligned to UTC (seconds to days on multiples of their length since the
// epoch, months on the calendar month), so every gateway agrees on their
// boundaries and a reset time means the same everywhere. A key keeps one
// counter per kind (requests, tokens) and window; limits of one kind and
// window share it, and a counter whose window has passed starts from zero
// (only the current window matters, in memory and in the stores).
//
//   - Admit checks rate limits first: one more request must fit each. A
//     request over one is counted nowhere. Then token budgets: used +
//     reserved by requests in flight + the request's estimate must fit each,
//     except that a request whose estimate alone is larger than a budget
//     fits it when nothing is reserved in flight and used is under the
//     budget (else it could never pass). An admitted request is counted against every rate limit and reserves
//     its estimate against every token limit. A request over budget reserves
//     nothing but still counts as a request, and gets a ticket, so that the
//     answer of the key's over_budget fallback is counted too.
//   - Ticket.Done(actual) releases the reservation and counts the answer's
//     usage (prompt + completion) in the windows current when it ends;
//     Ticket.Cancel only releases. Both are idempotent and nil-safe.
//   - RetryAfter is the time until every window that refused the request
//     has reset, rounded up to the second.
//
// Admit and Done hold the key's mutex for a few additions and never across
// I/O; a key with three limits costs a few hundred nanoseconds more than a
// key without (BenchmarkAdmitDone), far inside the goal of 5 µs.
//
// # Overshoot bounds
//
// One gateway (or several sharing Redis while it answers): a rate limit is
// exact. A token budget is reserved past its limit by one request at most,
// so a burst is admitted only while its estimates fit; what can pass the
// budget is what answers use beyond their estimates: at most the sum, over
// the requests in flight together, of (actual − estimate). Usage of an
// over_budget fallback is counted on top, by design: it is recorded, not
// refused.
//
// The one request: an estimate larger than the budget N itself would be
// refused forever by "used + reserved + estimate ≤ N", so such a request is
// admitted alone, when nothing is reserved in flight and used < N (issue
// 24, item 4). It reserves its whole estimate, so every other request waits
// until it ends, and none is admitted beside it: it takes a window that
// was under N to at most N − 1 + its own usage (plus, as above, what
// answers already in flight use beyond their estimates).
//
// Several gateways on Redis, token budgets: each gateway admits against
// the shared total as of its last pull plus what it counted since. Another
// gateway's usage reaches it within two sync intervals (their push, its
// pull), and reservations in flight are not shared. So a budget can be
// passed by what the other gateways settled in the last two intervals plus
// their reservations in flight, plus the per-answer excess above. A key a
// gateway has not seen since it started (after a restart, or on a new
// instance) is read from Redis on first sight, before its first admission
// or its first showing in Usage and All, in one round trip bounded by
// RedisConfig.Timeout; if that fails, the gateway is degraded and counts
// the key from what it has, as above.
//
// While Redis does not answer, every gateway goes on from the last shared
// total it saw, on its own counters: with G gateways, a window can admit up
// to G times what was left of it when Redis went away. What was counted
// meanwhile is pushed when Redis answers again. Pushes are at least once: a
// push whose reply was lost is pushed again, so a count can come out high,
// never low.
//
// A rate script that reached Redis and got no answer within the timeout
// may still run there: a stalled Redis runs what it was sent when it
// resumes, though the client has given up. Its request is decided and
// counted on the local counters but left out of the push, so that it is
// counted once, by the script, and not a second time by the push (a stall
// had left 11 counted for 5 admitted). A request that
// never reached Redis (no connection) is pushed, as any counted while
// degraded. Left over: such a request refused locally is still counted if
// its script runs and fits, and one whose script dies with Redis is counted
// nowhere, like Redis's own writes of its last second.
//
// # Stores
//
// Embedded (Config.Path): a bbolt file under Caddy's data directory. bbolt
// is pure Go (no cgo, so every platform the gateway is built for keeps
// building), one file with ACID transactions and a file lock, maintained by
// etcd, and already in the module graph through Caddy. Badger is heavier (an
// LSM tree, a directory of files and goroutines of its own), SQLite needs cgo
// or a large port, and a counter file in Caddy's storage would be rewritten
// whole on each save. A background writer saves the keys changed since the
// last save every FlushInterval (default 1 s) and on Close, in one
// transaction, outside every key's lock: Admit and Done never wait for the
// disk. A crash loses at most one interval; a restart or a reload loses
// nothing.
//
// Reloads: Caddy provisions the new config before it cleans up the old, so
// two configs briefly hold the same store. Open therefore hands out handles
// on one process-wide core per store (a refcounted registry, like Caddy's
// usage pools): both configs count in the same counters, and the last Close
// saves and closes the file. A file another process holds (a second server
// on one data directory, or `caddy validate` beside a running one, which
// provisions too) does not fail Open: after a second's wait the Limiter
// counts in memory, degraded, and takes the file at the first save after it
// is free, adding the counts it holds.
//
// Shared (Config.Redis): counters in Redis, one key per key name, counter
// and window start (PREFIX:{name}:r|t|s:WINDOW:START), expiring ten minutes
// after their window. Redis rather than Caddy's storage, because a shared
// counter needs an atomic increment: Caddy's storage offers Load, Store and
// a lock, so every count would be a lock, a read and a write (several round
// trips, on files by default) and stale windows would need sweeping, where
// Redis has INCRBY, scripts that run atomically, and keys that expire.
//
// Rate limits are decided by Redis: Admit runs one script that checks every
// window of the key and increments them all or none, bounded by
// RedisConfig.Timeout (default 100 ms), with no lock held. That is what
// makes "two gateways allow 5, not 10" exact, at the price of one round trip
// per request of a key with a rate limit (50–150 µs on loopback on a busy
// 2-core machine, BenchmarkAdmitDoneRedis).
// RedisConfig.LocalRates trades that for the token budgets' looser bound.
// Token usage is never on the request path: a background syncer pushes each
// counter's delta with INCRBY and reads back the total, pipelined, every
// SyncInterval (default 200 ms).
//
// If Redis fails (a script or a sync), the Limiter is degraded: Degraded()
// says so, Config.OnDegraded is told once, and requests are decided on the
// local counters without trying Redis on the request path. The syncer keeps
// trying every interval; its first success pushes what was counted
// meanwhile, clears the state and tells the hook (with a nil error).
package quota
