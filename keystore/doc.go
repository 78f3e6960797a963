// Package keystore keeps the gateway keys issued at run time: created,
// updated, rotated and revoked through Caddy's admin API and the status
// page, with the same rules a key block of the Caddyfile has (config.Key:
// models, rate, tokens, over_budget, reserve, priority, hedge; every rule
// added to config.Key is a rule of an issued key), an expiry and a note. It
// knows nothing of HTTP: the door (handler/keys.Who) asks Find for a
// caller's token, the caddy module turns the admin API's calls into Issue,
// Update, Rotate and Revoke.
//
// # Tokens are stored only as keyed hashes
//
// A token is made here (crypto/rand, 32 bytes, "sk-llmgw-" and base64url:
// the sk- shape that every mask of the gateway recognises, in engines'
// output and in callers' headers alike), handed back once by Issue or
// Rotate, and stored as HMAC-SHA256(secret, token). Find hashes the token
// a caller presents and looks the hash up in a map: O(1) in the number of
// keys, and a caller who cannot compute the hash cannot aim a guess at a
// stored one, so how long a miss takes says nothing about any key. The
// secret lives apart from the store, so that the store alone (a copy of
// the data folder's file, a dump of Redis) proves nothing about a token:
//
//   - given in the config (issued_keys { secret {env.LLM_KEYS_SECRET} }):
//     required with Redis, where every front door must hash alike and the
//     secret must not sit beside the hashes;
//   - else generated at the first issue into its own file beside the store
//     (Config.SecretPath: llm_gateway/keys.secret, mode 0600), so a backup
//     or copy of the store's file does not carry it.
//
// The store keeps a check value of the secret (an HMAC of a constant): a
// front door whose secret is not the one the keys were issued with (a lost
// secret file, one front door configured with another value) refuses every
// issued key and says why, rather than refusing them one by one with no
// word of it; issuing is refused until the secret is restored.
//
// # Stores
//
// Embedded (Config.Path): the bbolt file of the key counters and the
// request history (internal/boltfile), in buckets of its own. Every change
// is one transaction, written before the call returns; last use and totals
// are saved every FlushInterval (1 s). A file another process holds is no
// reason to refuse a config (caddy validate provisions beside a running
// server): the store is degraded, accepts no issued key, and takes the
// file when it is free.
//
// Shared (Config.Redis): the records in one hash, a version counter that
// every change increments, a check value, each key's use in a hash of its
// own, and a channel every change is published on. Each front door keeps
// every record in memory (Find never waits for Redis) and reloads them when
// the version moved: at once when a change is published, and at the
// latest at its next poll, every RefreshInterval (1 s). So while Redis
// answers, a key revoked at one front door is refused by every other within
// RefreshInterval plus one round trip, and usually within milliseconds
// (the publication). A front door that cannot reach Redis goes on with the
// keys it knew, says so (OnError), and catches up at its first poll after
// Redis answers again; a front door that starts while Redis is away accepts
// no issued key until then. Changes are compare-and-swap scripts, so two
// front doors that change one key at once never lose either change.
//
// # Reloads
//
// Caddy provisions a new config before it cleans up the old one, so Open
// hands out handles on one process-wide core per store (the file's path,
// or Redis's address, database and prefix), as the quota package does:
// both configs see the same keys, and the last Close saves and closes.
package keystore
