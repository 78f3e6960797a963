package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/internal/redistest"
)

// Money budgets through Caddy. The cloud engine is the runaway fake: every
// answer is 5,000 completion tokens, priced here at $40 per million output
// tokens (input free), so each answer costs $0.20. The local engine is the
// demo engine, unpriced: free.

const (
	moneyKey = "money-key-0123456789abcd"
	// a request naming max_tokens 6000 reserves 6,000 × $40 per million = $0.24
	moneyAsk    = `{"model":"x","max_tokens":6000,"messages":[{"role":"user","content":"write on"}]}`
	cloudPrices = "\t\tprice x input 0 output 40\n"
)

func moneySite(up *runaway, key string) string {
	return cloudPrices + `
		key money ` + moneyKey + ` {
			` + key + `
		}
		engine x {
			to ` + up.URL + `
			models x
		}
		engine local {
			` + engineCmd("--model local --chunk-delay 1ms") + `
			models local
		}`
}

// spendOf is what GET /llm_gateway/keys (at admin) says of key's first
// money budget: used and remaining, in dollars.
func spendOf(t *testing.T, admin, key string) (used, remaining string) {
	t.Helper()
	_, body := do(t, mustReq(http.MethodGet, admin+"/llm_gateway/keys"))
	var listing []struct {
		Key    string `json:"key"`
		Limits []struct {
			Kind      string          `json:"kind"`
			Limit     string          `json:"limit"`
			Used      json.RawMessage `json:"used"`
			Remaining json.RawMessage `json:"remaining"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(body), &listing); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, k := range listing {
		for _, l := range k.Limits {
			if k.Key == key && l.Kind == "spend" {
				return string(l.Used), string(l.Remaining)
			}
		}
	}
	t.Fatalf("no money budget of %s in %s", key, body)
	return "", ""
}

func resetMoneyKey(t *testing.T, admin, name string) {
	t.Helper()
	if resp, body := do(t, mustReq(http.MethodPost, admin+"/llm_gateway/keys/"+name+"/reset")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// A spend 1/d key is served by the cloud engine while its dollar lasts,
// with the money left in its headers, then by the local engine, for free.
func TestASpentMoneyBudgetFallsBackToALocalEngine(t *testing.T) {
	up := newRunaway(t)
	up.let()
	startGateway(t, moneySite(up, "spend 1/d\n\t\t\tover_budget fallback local"))
	resetMoneyKey(t, adminURL, "money")         // the counters outlive a test in this binary's data directory
	since := fmt.Sprint(time.Now().UnixMilli()) // and so does the history
	// used before each request, plus its $0.24: what is left while it runs
	for i, left := range []string{"0.76", "0.56", "0.36", "0.16"} {
		resp, body := post(t, "/v1/chat/completions", moneyAsk, "Authorization", "Bearer "+moneyKey)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "x" {
			t.Fatalf("request %d: %d %v %s", i+1, resp.StatusCode, resp.Header, body)
		}
		if h := resp.Header; h.Get("X-Ratelimit-Limit-Spend") != "1.00" || h.Get("X-Ratelimit-Remaining-Spend") != left || h.Get("X-Ratelimit-Reset-Spend") == "" {
			t.Fatalf("request %d: %v, want %s left", i+1, h, left)
		}
	}
	// $0.80 spent: $0.24 more does not fit
	for range 2 {
		resp, body := post(t, "/v1/chat/completions", moneyAsk, "Authorization", "Bearer "+moneyKey)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "local" || resp.Header.Get("X-LLM-Fallback") != "local" {
			t.Fatalf("over budget: %d %v %s", resp.StatusCode, resp.Header, body)
		}
		if got := resp.Header.Get("X-Ratelimit-Remaining-Spend"); got != "0.20" {
			t.Fatalf("over budget: %s left, want 0.20", got)
		}
	}
	if up.arrived.Load() != 4 {
		t.Fatalf("the cloud engine got %d requests", up.arrived.Load())
	}
	if used, left := spendOf(t, adminURL, "money"); used != "0.80" || left != "0.20" {
		t.Fatalf("the admin API: used %s, remaining %s", used, left)
	}
	// what the key spent, by model and engine, from the history
	syncHistory(t)
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/spend?key=money&since="+since))
	var sp struct {
		Cost   json.RawMessage `json:"cost_usd"`
		Groups []struct {
			Key, Model, Engine string
			Requests           int
			Cost               json.Number `json:"cost_usd"`
		}
	}
	if err := json.Unmarshal([]byte(body), &sp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	got := fmt.Sprintf("%s %+v", sp.Cost, sp.Groups)
	if want := "0.80 [{Key:money Model:x Engine:x Requests:4 Cost:0.80} {Key:money Model:x Engine:local Requests:2 Cost:0.00}]"; got != want {
		t.Fatalf("GET /llm_gateway/spend: %s\nwant %s\n%s", got, want, body)
	}
}

// 50 concurrent requests on a spend 1/d key, all in flight at once: each
// reserves what it may cost, so those admitted spend the budget and no
// more than one answer past it (here, requests whose limit bounds their
// answers at their cost: not a cent past it); the rest are refused while
// the budget is held by the requests in flight.
func TestFiftyConcurrentRequestsOverspendAMoneyBudgetByOneAnswerAtMost(t *testing.T) {
	up := newRunaway(t)
	startGateway(t, moneySite(up, "spend 1/d"))
	resetMoneyKey(t, adminURL, "money")
	ask := strings.Replace(moneyAsk, "6000", "5000", 1) // reserves $0.20, what its answer costs
	statuses := make(chan int, 50)
	codes := make(chan string, 50)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			resp, body := post(t, "/v1/chat/completions", ask, "Authorization", "Bearer "+moneyKey)
			if resp.StatusCode == http.StatusTooManyRequests {
				var e struct {
					Error struct{ Code, Type string }
				}
				json.Unmarshal([]byte(body), &e)
				codes <- e.Error.Type + " " + e.Error.Code + " Retry-After " + resp.Header.Get("Retry-After")
			}
			statuses <- resp.StatusCode
		})
	}
	// every request is either at the engine or answered (refused): the
	// burst is decided while all of it is in flight
	got := map[int]int{}
	for range 50 {
		select {
		case <-up.arrivals:
		case st := <-statuses:
			got[st]++
		}
	}
	up.let()
	wg.Wait()
	close(statuses)
	close(codes)
	for st := range statuses {
		got[st]++
	}
	if got[200] != 5 || got[http.StatusTooManyRequests] != 45 || up.arrived.Load() != 5 {
		t.Fatalf("statuses %v, %d at the engine", got, up.arrived.Load())
	}
	for c := range codes {
		if c != "spend rate_limit_exceeded Retry-After 1" {
			t.Fatalf("a refusal: %s", c)
		}
	}
	used, _ := spendOf(t, adminURL, "money")
	spent, err := price.ParseAmount(used)
	if err != nil || spent > price.Dollar+200_000_000 {
		t.Fatalf("spent %s (%v) of $1, one answer being $0.20", used, err)
	}
	t.Logf("50 concurrent requests on a $1 budget, $0.20 answers: %d admitted, $%s spent", up.arrived.Load(), used)
	// spent now, not held: insufficient_quota until the day ends
	resp, body := post(t, "/v1/chat/completions", ask, "Authorization", "Bearer "+moneyKey)
	if resp.StatusCode != 429 || !strings.Contains(body, `"code":"insufficient_quota"`) || !strings.Contains(body, "key money has spent its money budget ($1/d)") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// Two front doors on one Redis count one money budget: what the key spent
// at one, the other's admin API shows and its door holds to.
func TestTwoFrontDoorsOnRedisAgreeOnAMoneyBudget(t *testing.T) {
	redis := redistest.Start(t)
	up := newRunaway(t)
	up.let()
	site := fmt.Sprintf("\t\tstore redis %s\n%s", redis.Addr(), moneySite(up, "spend 1/d\n\t\t\tover_budget fallback local"))
	site = strings.Replace(site, engineCmd("--model local --chunk-delay 1ms"),
		"cmd {gateway.executable} llm-demo-engine --port {engine.port} --model local --chunk-delay 1ms\n\t\t\tto http://127.0.0.1:{engine.port}", 1)
	g1 := runGateway(t, t.TempDir(), freeAddr(t), freeAddr(t), site)
	g2 := runGateway(t, t.TempDir(), freeAddr(t), freeAddr(t), site)
	engine := func(g *gatewayProcess) string {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.addr+"/v1/chat/completions", strings.NewReader(moneyAsk))
		req.Header.Set("Authorization", "Bearer "+moneyKey)
		resp, body := do(t, req)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", g.addr, resp.StatusCode, body)
		}
		return resp.Header.Get("X-LLM-Engine")
	}
	for i := range 4 { // $0.80 at the first door
		if e := engine(g1); e != "x" {
			t.Fatalf("request %d: %s", i+1, e)
		}
	}
	eventually(t, "the second door sees the first's spend", func() bool {
		used, _ := spendOf(t, "http://"+g2.admin, "money")
		return used == "0.80"
	})
	if e := engine(g2); e != "local" {
		t.Fatalf("the second door sent a spent key to %s", e)
	}
	if used, left := spendOf(t, "http://"+g1.admin, "money"); used != "0.80" || left != "0.20" {
		t.Fatalf("the first door: used %s, remaining %s", used, left)
	}
	if up.arrived.Load() != 4 {
		t.Fatalf("the cloud engine got %d requests", up.arrived.Load())
	}
}

// A key issued at run time may have a money budget and join a team of the
// config; a team the config lacks is refused, naming it.
func TestAnIssuedKeyMaySpendAndJoinATeam(t *testing.T) {
	up := newRunaway(t)
	up.let()
	startGateway(t, cloudPrices+`
		issued_keys
		team eng {
			spend 100/mo
		}
		engine x {
			to `+up.URL+`
			models x
		}`)
	// the store outlives a test in this binary (as it outlives a config)
	do(t, mustReq(http.MethodDelete, adminURL+"/llm_gateway/keys/spender"))
	resetMoneyKey(t, adminURL, "team:eng") // a team's counters reset as a key's
	issue := func(body string) (*http.Response, string) {
		req := mustReq(http.MethodPost, adminURL+"/llm_gateway/keys")
		req.Body = io.NopCloser(strings.NewReader(body))
		return do(t, req)
	}
	if resp, body := issue(`{"name":"spender","spend":["1/d"],"team":"nope"}`); resp.StatusCode != 400 || !strings.Contains(body, "team nope is no team of this gateway") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body := issue(`{"name":"spender","spend":["0.50/d"],"team":"eng"}`)
	var issued struct{ Token string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &issued) != nil || issued.Token == "" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resetMoneyKey(t, adminURL, "spender")               // its counters outlive a revoke, as a name's do
	ask := strings.Replace(moneyAsk, "6000", "1000", 1) // reserves $0.04
	resp, body = post(t, "/v1/chat/completions", ask, "Authorization", "Bearer "+issued.Token)
	// its own budget is the tighter: $0.50 less $0.04 held
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit-Spend") != "0.50" || resp.Header.Get("X-Ratelimit-Remaining-Spend") != "0.46" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	// the answer cost $0.20, counted against the key and its team
	if used, _ := spendOf(t, adminURL, "spender"); used != "0.20" {
		t.Fatalf("the key: used %s", used)
	}
	if used, left := spendOf(t, adminURL, "team:eng"); used != "0.20" || left != "99.80" {
		t.Fatalf("the team: used %s, remaining %s", used, left)
	}
}

// Spend-aware routing through Caddy. A pool with prefer cheap sends to the
// free local engine, though the priced cloud engine is listed first. In a
// pool that takes its members in turn, a key with spend 1/d cheap_at 80%
// goes to both until a request would take its spend past 80 cents (each
// reserves $0.24 while in flight, and a cloud answer costs $0.20), then to
// the local engine alone, where the rotation would have sent every other
// request to the cloud.
func TestPreferCheapAndAKeyPastItsCheapAtShareGoToTheLocalEngine(t *testing.T) {
	up := newRunaway(t)
	up.let()
	startGateway(t, moneySite(up, "spend 1/d cheap_at 80%")+`
		pool cheap {
			member x
			member local
			prefer cheap
		}
		pool both {
			member x
			member local
			balance round_robin
		}`)
	resetMoneyKey(t, adminURL, "money") // the counters outlive a test in this binary's data directory
	ask := func(pool string) string {
		t.Helper()
		resp, body := post(t, "/v1/chat/completions", strings.Replace(moneyAsk, `"model":"x"`, `"model":"`+pool+`"`, 1), "Authorization", "Bearer "+moneyKey)
		if resp.StatusCode != 200 {
			t.Fatalf("pool %s: %d %v %s", pool, resp.StatusCode, resp.Header, body)
		}
		return resp.Header.Get("X-LLM-Engine")
	}
	for i := range 2 {
		if e := ask("cheap"); e != "local" {
			t.Fatalf("prefer cheap, request %d: answered by %s", i+1, e)
		}
	}
	if n := up.arrived.Load(); n != 0 {
		t.Fatalf("prefer cheap: the cloud engine got %d requests", n)
	}
	// spent before each request plus its $0.24: 0.24 x, 0.44 local, 0.44 x,
	// 0.64 local, 0.64 x, then 0.84 from the sixth on: past the share
	var got []string
	for range 8 {
		got = append(got, ask("both"))
	}
	if want := "x local x local x local local local"; strings.Join(got, " ") != want {
		t.Fatalf("the pool's members in turn: %v, want %s", got, want)
	}
	if used, left := spendOf(t, adminURL, "money"); used != "0.60" || left != "0.40" {
		t.Fatalf("the admin API: used %s, remaining %s", used, left)
	}
}
