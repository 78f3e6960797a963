//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The door: keys with rules, tried as a hostile key holder
// would, on every route of llm_gateway alone, in a Caddy of its own whose
// counters start at zero. Four parts:
//
//  1. rate: a `rate 5/m` key sends 50 requests at once, spread over the
//     routes (/v1/ chat and streams, /v1/models, /upstream/, the status
//     page's API): how many are admitted (goal 5);
//  2. bursts: 50 concurrent streams on a `tokens 1000/d` key, each answer
//     905 tokens long (issue 24's), with max_tokens, with
//     max_completion_tokens, and with neither; and (issue 51's) 50 naming
//     no limit on a `tokens 20000/d` key whose answers are 5,000 tokens:
//     the tokens the upstream spent (goal ≤ 1.2× the budget);
//  3. spellings: streams whose `stream` or `stream_options` is spelled
//     another way (`"Stream":true`, `"Stream_Options":{}`), on /v1/ and
//     /upstream/: each must be 400 ambiguous_member and reach no engine;
//  4. operators: every key with rules tries every action of the status
//     page's API, and what its rules forbid on /upstream/ (another model,
//     other methods, a budget where budgets are off): goal 0 performed.
const (
	doorRate    = 5    // the rated key's requests per minute
	doorBudget  = 1000 // the burst keys' tokens per day
	doorBurst   = 50   // requests sent at once, in parts 1 and 2
	doorAnswer  = 905  // completion tokens of each answer in the bursts
	doorKeyRule = "rate 5/m"
)

// doorKeys are the door Caddy's keys and their rules; each key's token is
// doorToken(name).
var doorKeys = []struct{ name, rules string }{
	{"ops", "operator"},
	{"rated", doorKeyRule},
	{"burst-max-tokens", "tokens 1000/d"},
	{"burst-max-completion", "tokens 1000/d"},
	{"burst-none", "tokens 1000/d"},
	{"burst-string", "tokens 1000/d"},
	{"burst-float", "tokens 1000/d"},
	{"burst-n", "tokens 1000/d"},
	{"burst-best-of", "tokens 1000/d"},
	{"burst-unbounded", "tokens 20000/d"},
	{"spelling", "tokens 1M/d"},
	{"narrow", "models bench\n\t\t\trate 10k/m"},
}

func doorToken(name string) string { return "bench-door-" + name + "-key-0001" }

// doorCaddyfileTemplate is the door's Caddy: the gateway alone, its keys,
// the status page at /llm, /upstream/ as it is by default (GET, HEAD, POST;
// budgets off), engines up (model bench) and other (model other), both the
// fake upstream. Arguments: the admin option, log file, gw port, the keys,
// upstream port, upstream port.
const doorCaddyfileTemplate = globalOptions + `
http://127.0.0.1:%d {
	llm_gateway {
		max_body 48MiB
		max_body_in_flight 128MiB
%s		ui /llm
		engine up {
			to http://127.0.0.1:%d
			models bench
		}
		engine other {
			to http://127.0.0.1:%d
			models other
		}
	}
}
`

// startDoorCaddy writes the door's Caddyfile and starts its Caddy with the
// gateway's counters removed: they live in Caddy's data directory and
// survive restarts, and a day's budget spent by the last run would be
// spent in this one.
func (e *env) startDoorCaddy(ctx context.Context) error {
	var keys strings.Builder
	for _, k := range doorKeys {
		fmt.Fprintf(&keys, "\t\tkey %s %s {\n\t\t\t%s\n\t\t}\n", k.name, doorToken(k.name), k.rules)
	}
	cf := filepath.Join(e.outDir, "door.Caddyfile")
	logFile, _ := filepath.Abs(filepath.Join(e.outDir, "caddy-door.log"))
	text := fmt.Sprintf(doorCaddyfileTemplate, "admin off", logFile, e.gwPort, keys.String(), e.upPort, e.upPort)
	if err := os.WriteFile(cf, []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(e.gatewayData()); err != nil {
		return err
	}
	return e.startCaddyWith(ctx, cf, e.gwPort)
}

// doorCall is one request of the door's parts as its client saw it.
type doorCall struct {
	method, path, key, body string
	header                  map[string]string
}

// doorReply is the answer to a doorCall.
type doorReply struct {
	status int
	body   []byte
	err    error
}

// send sends c with the id, reads the answer (up to 1 MiB; only the
// headers of an event stream, which an operator's would hold open) and
// gives up after 10 s.
func (c doorCall) send(ctx context.Context, client *http.Client, gw, id string) doorReply {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, gw+c.path, body)
	if err != nil {
		return doorReply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+doorToken(c.key))
	req.Header.Set("X-Bench-Req", id)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return doorReply{err: err}
	}
	defer resp.Body.Close()
	a := doorReply{status: resp.StatusCode}
	if strings.HasPrefix(c.path, "/llm/api/events") || strings.HasPrefix(c.path, "/llm/api/logs/") {
		return a // the page's event streams: the status is the answer
	}
	a.body, a.err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return a
}

// all sends the calls at once (every goroutine waits for the last one to
// be started) with ids prefix-0, prefix-1, …, and returns the answers in order.
func all(ctx context.Context, client *http.Client, gw, prefix string, calls []doorCall) []doorReply {
	out := make([]doorReply, len(calls))
	start := make(chan struct{})
	var done sync.WaitGroup
	for i, c := range calls {
		done.Go(func() {
			<-start
			out[i] = c.send(ctx, client, gw, fmt.Sprintf("%s-%d", prefix, i))
		})
	}
	close(start)
	done.Wait()
	return out
}

var (
	doorMessages = `"messages":[{"role":"user","content":"hi"}]`
	doorPlain    = `{"model":"bench",` + doorMessages + `}`
	doorStream   = `{"model":"bench","stream":true,` + doorMessages + `}`
)

// doorRoutes are the routes the rated key's burst is spread over, each with
// what it may answer: 200 when admitted, 429 over the rate, 401 for the
// status page's API (never admitted).
var doorRoutes = []doorCall{
	{method: http.MethodPost, path: chatPath, body: doorPlain},
	{method: http.MethodPost, path: chatPath, body: doorStream},
	{method: http.MethodGet, path: "/v1/models"},
	{method: http.MethodGet, path: "/v1/models/bench"},
	{method: http.MethodPost, path: "/upstream/bench" + chatPath, body: doorPlain},
	{method: http.MethodPost, path: "/upstream/bench" + chatPath, body: doorStream},
	{method: http.MethodGet, path: "/upstream/bench/health"},
	{method: http.MethodGet, path: "/llm/api/state"},
	{method: http.MethodPost, path: "/llm/api/keys/rated/reset"},
}

// doorBursts are part 2's bursts: the key, the body, the most tokens the
// burst may use, as a multiple of the budget, the key's budget and each
// answer's length.
var doorBursts = []struct {
	key, label, body string
	most             float64
	budget, answer   int64
}{
	{"burst-max-tokens", "max_tokens", fmt.Sprintf(`{"model":"bench","stream":true,"max_tokens":%d,%s}`, doorAnswer, doorMessages), 1.2, doorBudget, doorAnswer},
	{"burst-max-completion", "max_completion_tokens", fmt.Sprintf(`{"model":"bench","stream":true,"max_completion_tokens":%d,%s}`, doorAnswer, doorMessages), 1.2, doorBudget, doorAnswer},
	{"burst-none", "no token limit", doorStream, 1.2, doorBudget, doorAnswer},
	// round 2: the limit and the choices as lax engines read them
	{"burst-string", `max_tokens "905"`, fmt.Sprintf(`{"model":"bench","stream":true,"max_tokens":"%d",%s}`, doorAnswer, doorMessages), 1.2, doorBudget, doorAnswer},
	{"burst-float", "max_tokens 9.05e2", `{"model":"bench","stream":true,"max_tokens":9.05e2,` + doorMessages + `}`, 1.2, doorBudget, doorAnswer},
	{"burst-n", "n 10, max_tokens 90", `{"model":"bench","stream":true,"n":10,"max_tokens":90,` + doorMessages + `}`, 1.2, doorBudget, doorAnswer},
	{"burst-best-of", `best_of "10", max_completion_tokens 90.0`, `{"model":"bench","stream":true,"best_of":"10","max_completion_tokens":90.0,` + doorMessages + `}`, 1.2, doorBudget, doorAnswer},
	// round 3: no limit, answers a quarter of the budget (it was 4.75x)
	{"burst-unbounded", "no token limit, 5,000-token answers", doorStream, 1.2, 20000, 5000},
}

// caseVariants are streams that name stream or stream_options in another
// spelling: a Go engine reads them as the member, the gateway must refuse
// them.
var caseVariants = []string{
	`{"model":"bench","Stream":true,` + doorMessages + `}`,
	`{"model":"bench","STREAM":true,` + doorMessages + `}`,
	`{"model":"bench","stream":false,"Stream":true,` + doorMessages + `}`,
	`{"model":"bench","stream":true,"Stream_Options":{},` + doorMessages + `}`,
	`{"model":"bench","stream":true,"stream_options":{"include_usage":false},"Stream_Options":{"include_usage":true},` + doorMessages + `}`,
}

// operatorActions are the status page API's operator actions; %s is the
// calling key's own name.
var operatorActions = []doorCall{
	{method: http.MethodGet, path: "/llm/api/state"},
	{method: http.MethodGet, path: "/llm/api/events"},
	{method: http.MethodGet, path: "/llm/api/logs/up"},
	{method: http.MethodPost, path: "/llm/api/engines/up/stop"},
	{method: http.MethodPost, path: "/llm/api/engines/up/stop?drain=true"},
	{method: http.MethodPost, path: "/llm/api/engines/up/start"},
	{method: http.MethodPost, path: "/llm/api/stop-all"},
	{method: http.MethodPost, path: "/llm/api/keys/%s/reset"},
	{method: http.MethodPost, path: "/llm/api/keys/ops/reset"},
}

// forbiddenPassthrough are /upstream/ requests that the calling key's rules
// refuse.
var forbiddenPassthrough = []doorCall{
	{method: http.MethodGet, path: "/upstream/other/health", key: "narrow"},                                                      // a model it may not use
	{method: http.MethodPost, path: "/upstream/other" + chatPath, key: "narrow", body: `{"model":"other",` + doorMessages + `}`}, // the same, with a body
	{method: http.MethodPost, path: "/upstream/bench" + chatPath, key: "narrow", body: `{"model":"other",` + doorMessages + `}`}, // its model in the path, another in the body
	{method: http.MethodDelete, path: "/upstream/bench/v1/files/file-1", key: "narrow"},                                          // a method not served
	{method: http.MethodPut, path: "/upstream/bench/v1/fine_tuning/jobs", key: "narrow"},
	{method: http.MethodPost, path: "/upstream/bench" + chatPath, key: "burst-none", body: doorPlain}, // a budget, where budgets are off
	{method: http.MethodGet, path: "/upstream/bench/health", key: "spelling"},
}

// burstResult is one burst of part 2.
type burstResult struct {
	label    string
	most     float64
	budget   int64
	admitted int   // 200s
	refused  int   // 429 insufficient_quota, or rate_limit_exceeded (the budget held in flight)
	other    int   // any other answer
	used     int64 // tokens the upstream spent on the burst's answers
	charged  int64 // tokens the gateway counted against the key
}

// doorResult is what runDoor measured.
type doorResult struct {
	rateSent, rateAdmitted     int
	rate429, rate401, rateElse int
	rateCalls                  int64 // upstream chat calls the rated key's burst caused

	bursts []burstResult

	spellSent, spellRefused int
	spellCalls              int64 // upstream calls the variants caused
	spellingUsed            int64 // tokens the upstream spent for the spelling key: its variants, and one stream spelled exactly
	spellingCharged         int64 // … and what the gateway charged it

	operatorTried, operatorPerformed int
	passthroughTried                 int
	passthroughServed                int
	operatorControl                  string // the operator key's state and reset: "200, 200"

	round2 door2Result // door2.go
}

// runDoor runs the door's four parts against a fresh Caddy.
func runDoor(ctx context.Context, e *env) (doorResult, error) {
	var res doorResult
	if err := e.startDoorCaddy(ctx); err != nil {
		return res, err
	}
	defer e.stopCaddy()
	gw, up := e.url(e.gwPort), e.url(e.upPort)
	client, tr := newClient(doorBurst + 4)
	defer tr.CloseIdleConnections()
	if _, err := upstreamCalls(ctx, up, true); err != nil {
		return res, err
	}

	// 1. the rate, across routes, all in one minute window (windows are
	// aligned to UTC minutes: a burst across a boundary meets two)
	if s := time.Now().UTC().Second(); s >= 58 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	var calls []doorCall
	for i := range doorBurst {
		c := doorRoutes[i%len(doorRoutes)]
		c.key = "rated"
		calls = append(calls, c)
	}
	for _, a := range all(ctx, client, gw, "door-rate", calls) {
		res.rateSent++
		switch {
		case a.err != nil:
			res.rateElse++
		case a.status >= 200 && a.status < 300:
			res.rateAdmitted++
		case a.status == http.StatusTooManyRequests:
			res.rate429++
		case a.status == http.StatusUnauthorized:
			res.rate401++
		default:
			res.rateElse++
			progress("door: rated key: unexpected %d %.200s", a.status, a.body)
		}
	}

	// 2. the bursts
	for _, b := range doorBursts {
		calls = calls[:0]
		for range doorBurst {
			calls = append(calls, doorCall{method: http.MethodPost, path: chatPath, key: b.key, body: b.body,
				header: map[string]string{"X-Bench-Answer-Tokens": fmt.Sprint(b.answer), "X-Bench-Chunk-Delay": "2ms"}})
		}
		br := burstResult{label: b.label, most: b.most, budget: b.budget}
		for _, a := range all(ctx, client, gw, "door-burst-"+b.key, calls) {
			switch {
			case a.err == nil && a.status == http.StatusOK && bytes.HasSuffix(a.body, doneEvent):
				br.admitted++
			case a.err == nil && a.status == http.StatusTooManyRequests &&
				(bytes.Contains(a.body, []byte("insufficient_quota")) || bytes.Contains(a.body, []byte("rate_limit_exceeded"))):
				br.refused++
			default:
				br.other++
				progress("door: burst %s: unexpected %d %v %.200s", b.label, a.status, a.err, a.body)
			}
		}
		res.bursts = append(res.bursts, br)
	}

	// 3. spellings, on /v1/ (a key with a budget) and on /upstream/ (a key
	// without one: a budget may not use it)
	answer := map[string]string{"X-Bench-Answer-Tokens": fmt.Sprint(doorAnswer)}
	for _, route := range []struct{ path, key string }{{chatPath, "spelling"}, {"/upstream/bench" + chatPath, "narrow"}} {
		calls = calls[:0]
		for _, v := range caseVariants {
			calls = append(calls, doorCall{method: http.MethodPost, path: route.path, key: route.key, body: v, header: answer})
		}
		for _, a := range all(ctx, client, gw, "door-spelling-"+route.key, calls) {
			res.spellSent++
			if a.err == nil && a.status == http.StatusBadRequest && bytes.Contains(a.body, []byte("ambiguous_member")) {
				res.spellRefused++
			} else {
				progress("door: case variant: %d %v %.200s", a.status, a.err, a.body)
			}
		}
	}
	exact := doorCall{method: http.MethodPost, path: chatPath, key: "spelling", body: doorStream, header: answer}
	if a := exact.send(ctx, client, gw, "door-exact"); a.err != nil || a.status != http.StatusOK {
		return res, fmt.Errorf("door: a stream spelled exactly: %d %v %.200s", a.status, a.err, a.body)
	}

	// the figures so far: the upstream's count, and the gateway's (read as
	// the operator, which also proves the operator's API answers), before
	// part 4 tries to reset them
	time.Sleep(300 * time.Millisecond) // a stream's charge lands as its handler returns
	counts, err := upstreamCalls(ctx, up, false)
	if err != nil {
		return res, err
	}
	res.rateCalls = counts.sum("door-rate-", counts.Calls)
	res.spellCalls = counts.sum("door-spelling-", counts.Calls)
	res.spellingUsed = counts.sum("door-spelling-spelling-", counts.Tokens) + counts.Tokens["door-exact"]
	state := doorCall{method: http.MethodGet, path: "/llm/api/state", key: "ops"}.send(ctx, client, gw, "door-ops-state")
	used, err := tokensCharged(state)
	if err != nil {
		return res, err
	}
	for i, b := range doorBursts {
		res.bursts[i].used = counts.sum("door-burst-"+b.key+"-", counts.Tokens)
		res.bursts[i].charged = used[b.key]
	}
	res.spellingCharged = used["spelling"]

	// 4. operator actions and /upstream/ from every key with rules
	calls = calls[:0]
	for _, k := range doorKeys {
		if k.name == "ops" {
			continue
		}
		for _, c := range operatorActions {
			c.key = k.name
			if strings.Contains(c.path, "%s") {
				c.path = fmt.Sprintf(c.path, k.name)
			}
			calls = append(calls, c)
		}
	}
	for _, a := range all(ctx, client, gw, "door-operator", calls) {
		res.operatorTried++
		if a.err != nil || a.status != http.StatusUnauthorized {
			res.operatorPerformed++
			progress("door: an operator action of a key with rules: %d %v %.200s", a.status, a.err, a.body)
		}
	}
	for i, c := range forbiddenPassthrough {
		a := c.send(ctx, client, gw, fmt.Sprintf("door-passthrough-%d", i))
		res.passthroughTried++
		if a.err != nil || a.status < 400 || a.status >= 500 {
			res.passthroughServed++
			progress("door: %s %s as %s: %d %v %.200s", c.method, c.path, c.key, a.status, a.err, a.body)
		}
	}
	reset := doorCall{method: http.MethodPost, path: "/llm/api/keys/burst-none/reset", key: "ops"}.send(ctx, client, gw, "door-ops-reset")
	res.operatorControl = fmt.Sprintf("%d, %d", state.status, reset.status)

	// 5 and 6: round 2
	res.round2, err = runDoor2(ctx, e, client, gw, up)
	return res, err
}

// sum adds up the counts of the ids that start with prefix.
func (c callCounts) sum(prefix string, counts map[string]int64) int64 {
	var n int64
	for id, v := range counts {
		if strings.HasPrefix(id, prefix) {
			n += v
		}
	}
	return n
}

// tokensCharged reads each key's tokens used from the status page's state.
func tokensCharged(a doorReply) (map[string]int64, error) {
	if a.err != nil || a.status != http.StatusOK {
		return nil, fmt.Errorf("door: the operator's state: %d %v %.200s", a.status, a.err, a.body)
	}
	var s struct {
		Keys []struct {
			Name   string `json:"name"`
			Limits []struct {
				Kind string `json:"kind"`
				Used int64  `json:"used"`
			} `json:"limits"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(a.body, &s); err != nil {
		return nil, fmt.Errorf("door: the operator's state: %v", err)
	}
	out := map[string]int64{}
	for _, k := range s.Keys {
		for _, l := range k.Limits {
			if l.Kind == "tokens" {
				out[k.Name] = l.Used
			}
		}
	}
	return out, nil
}

// addDoor turns the door's counts into rows.
func (r *report) addDoor(d doorResult) {
	r.doorCheck(fmt.Sprintf("`%s` key, %d requests at once over %d routes: admitted", doorKeyRule, d.rateSent, len(doorRoutes)),
		fmt.Sprint(d.rateAdmitted), fmt.Sprintf("= %d", doorRate), d.rateAdmitted == doorRate && d.rateElse == 0)
	r.doorInfo("  refused 429 (rate) / 401 (page API) / else", fmt.Sprintf("%d / %d / %d", d.rate429, d.rate401, d.rateElse))
	r.doorInfo("  upstream chat calls they made", fmt.Sprint(d.rateCalls))
	for _, b := range d.bursts {
		limit := int64(b.most * float64(b.budget))
		r.doorCheck(fmt.Sprintf("tokens %d/d, %d streams at once, %s: used", b.budget, doorBurst, b.label),
			fmt.Sprintf("%d (%.2fx)", b.used, float64(b.used)/float64(b.budget)), fmt.Sprintf("<= %d (%.1fx)", limit, b.most),
			b.used <= limit && b.admitted > 0 && b.other == 0)
		r.doorInfo("  admitted / refused 429 / gateway charged", fmt.Sprintf("%d / %d / %d", b.admitted, b.refused, b.charged))
	}
	r.doorCheck("case-variant streams (Stream, Stream_Options, …) refused 400", fmt.Sprintf("%d/%d", d.spellRefused, d.spellSent),
		"all", d.spellSent > 0 && d.spellRefused == d.spellSent)
	r.doorCheck("  upstream calls they made", fmt.Sprint(d.spellCalls), "0", d.spellCalls == 0)
	r.doorCheck("  the budget key (and a stream spelled exactly): charged / spent", fmt.Sprintf("%d / %d", d.spellingCharged, d.spellingUsed),
		"equal", d.spellingUsed > 0 && d.spellingCharged == d.spellingUsed)
	r.doorCheck("operator actions keys with rules performed", fmt.Sprintf("%d/%d", d.operatorPerformed, d.operatorTried),
		"0", d.operatorTried > 0 && d.operatorPerformed == 0)
	r.doorCheck("  the operator key: state, reset", d.operatorControl, "200, 200", d.operatorControl == "200, 200")
	r.doorCheck("/upstream/ requests the key's rules forbid, served", fmt.Sprintf("%d/%d", d.passthroughServed, d.passthroughTried),
		"0", d.passthroughServed == 0)
	r.addDoor2(d.round2)
}
