package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Every row of the verdict table.
func TestVerdictTable(t *testing.T) {
	pol := policy{retryAfterMax: 5 * time.Second, hangupGrace: 10 * time.Second}
	type row struct {
		j                                judgement
		attempt, answered, retry, moveOn bool
		effect                           effect
		scope                            scope
		reason                           string
	}
	rows := map[string]row{
		"good":                  {j: judgement{outcome: outcomeGood}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "ok"},
		"connect":               {j: judgement{outcome: outcomeConnect}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeEngine, reason: "connect"},
		"dns":                   {j: judgement{outcome: outcomeDNS}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeEngine, reason: "dns"},
		"instant reset":         {j: judgement{outcome: outcomeClosed, silence: time.Millisecond}, attempt: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeEngine, reason: "closed"},
		"hang-up after silence": {j: judgement{outcome: outcomeClosed, silence: 15 * time.Second}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "closed"},
		"timeout":               {j: judgement{outcome: outcomeTimeout}, attempt: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "timeout"},
		"stream error":          {j: judgement{outcome: outcomeStreamError}, attempt: true, answered: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "stream-error"},
		"400":                   {j: judgement{outcome: outcomeStatus, status: 400}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "400"},
		"422":                   {j: judgement{outcome: outcomeStatus, status: 422}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "422"},
		"401":                   {j: judgement{outcome: outcomeStatus, status: 401}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "401"},
		"403":                   {j: judgement{outcome: outcomeStatus, status: 403}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "403"},
		"404":                   {j: judgement{outcome: outcomeStatus, status: 404}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "404"},
		"408":                   {j: judgement{outcome: outcomeStatus, status: 408}, attempt: true, answered: true, moveOn: true, effect: effectAbandon, scope: scopeModel, reason: "408"},
		"429":                   {j: judgement{outcome: outcomeStatus, status: 429}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "429"},
		"429 long Retry-After":  {j: judgement{outcome: outcomeStatus, status: 429, retryAfter: time.Minute}, attempt: true, answered: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "429"},
		"500":                   {j: judgement{outcome: outcomeStatus, status: 500}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "500"},
		"502":                   {j: judgement{outcome: outcomeStatus, status: 502}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "502"},
		"503":                   {j: judgement{outcome: outcomeStatus, status: 503}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "503"},
		"504":                   {j: judgement{outcome: outcomeStatus, status: 504}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "504"},
		"529 overloaded":        {j: judgement{outcome: outcomeStatus, status: 529}, attempt: true, answered: true, retry: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "529"},
		"untranslatable":        {j: judgement{outcome: outcomeUntranslatable}, moveOn: true, reason: "untranslatable"},
		"media":                 {j: judgement{outcome: outcomeMedia}, moveOn: true, reason: "media"},
		"bad answer":            {j: judgement{outcome: outcomeBadAnswer}, attempt: true, answered: true, moveOn: true, effect: effectFailure, scope: scopeModel, reason: "bad-answer"},
		"no credentials":        {j: judgement{outcome: outcomeAuth}, moveOn: true, reason: "credentials"},
		"418":                   {j: judgement{outcome: outcomeStatus, status: 418}, attempt: true, answered: true, effect: effectAbandon, scope: scopeModel, reason: "418"},
		"start failed":          {j: judgement{outcome: outcomeStart}, moveOn: true, reason: "start"},
		"not running":           {j: judgement{outcome: outcomeNotRunning}, moveOn: true, reason: "stopped"},
		"slow start":            {j: judgement{outcome: outcomeSlow}, moveOn: true, reason: "slow"},
		"breaker open":          {j: judgement{outcome: outcomeOpen}, moveOn: true, reason: "open"},
		"busy":                  {j: judgement{outcome: outcomeBusy}, moveOn: true, reason: "busy"},
		"client went away":      {j: judgement{outcome: outcomeCanceled}, effect: effectAbandon, scope: scopeModel, reason: "canceled"},
		"request fault":         {j: judgement{outcome: outcomeRequestFault, status: 500}, attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "refused"},
	}
	for name, r := range rows {
		v := judge(r.j, pol)
		want := verdict{attempt: r.attempt, answered: r.answered, effect: r.effect, scope: r.scope, retry: r.retry, moveOn: r.moveOn, reason: r.reason}
		if v != want {
			t.Errorf("%s: got %+v, want %+v", name, v, want)
		}
	}
}

// apply puts a verdict on the breaker of its scope, and nothing else.
func TestSettleTouchesOnlyTheBreakerOfTheVerdictsScope(t *testing.T) {
	e, err := engines.New(engines.Config{Name: "e", To: "http://127.0.0.1:1", Models: []string{"a", "b"}, BreakerFailures: 1}, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Destruct()
	c := candidate{rt: &route{eng: e, cfg: e.Config()}, role: rolePrimary}
	pol := c.policy()

	tk, ok := c.admit("a")
	if !ok {
		t.Fatal("refused")
	}
	tk.apply(judge(judgement{outcome: outcomeStatus, status: 503}, pol))
	if e.ModelBreaker("a").State() != engines.BreakerOpen || e.Breaker().State() != engines.BreakerClosed {
		t.Fatalf("a 503 of model a: model %s, engine %s", e.ModelBreaker("a").State(), e.Breaker().State())
	}
	if _, ok := c.admit("a"); ok {
		t.Fatal("model a's open breaker let a request through")
	}
	tk, ok = c.admit("b")
	if !ok {
		t.Fatal("model a's breaker kept model b away")
	}
	tk.apply(judge(judgement{outcome: outcomeConnect}, pol))
	if e.Breaker().State() != engines.BreakerOpen || e.ModelBreaker("b").State() != engines.BreakerClosed {
		t.Fatalf("a connect failure: engine %s, model b %s", e.Breaker().State(), e.ModelBreaker("b").State())
	}
	if _, ok := c.admit("b"); ok {
		t.Fatal("the engine's open breaker let a request through")
	}
}

// modelOf is the "model" of a request body.
func modelOf(r *http.Request) string {
	var b struct{ Model string }
	_ = json.NewDecoder(r.Body).Decode(&b)
	return b.Model
}

func TestOverloadedModelOpensOnlyItsOwnBreaker(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := modelOf(&http.Request{Body: io.NopCloser(strings.NewReader(string(body)))})
		mu.Lock()
		hits[m]++
		mu.Unlock()
		switch {
		case m == "A":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"model A is overloaded"}}`)
		case strings.Contains(string(body), "forbidden topic"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"flagged by the content filter","code":"content_filter"}}`)
		default:
			answerOK(w, m)
		}
	}))
	defer cloud.Close()
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "backup") }))
	defer backup.Close()
	zero := 0
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "cloud", To: cloud.URL, Models: []string{"A", "B"}, Fallback: "backup", Retries: &zero, BreakerFailures: 2},
		{Name: "backup", To: backup.URL, Models: []string{"backup"}},
	}}, nil)

	for i := range 5 {
		resp, body := postJSON(t, url, `{"model":"A"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "backup" {
			t.Fatalf("A, request %d: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	mu.Lock()
	if hits["A"] != 2 {
		t.Fatalf("the engine saw %d requests for A, want 2 (then A's breaker opened)", hits["A"])
	}
	mu.Unlock()
	for i := range 3 {
		resp, body := postJSON(t, url, `{"model":"B"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "cloud" {
			t.Fatalf("B, request %d went elsewhere: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	resp, body := postJSON(t, url, `{"model":"B","messages":[{"role":"user","content":"forbidden topic"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "content_filter") || resp.Header.Get("X-LLM-Engine") != "cloud" {
		t.Fatalf("the content filter's 400: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if res := lastResult.Load(); res.Attempts != 1 {
		t.Fatalf("the 400 took %d attempts", res.Attempts)
	}
}
