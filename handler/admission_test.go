package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

const opsKey = "ops-key-0123456789abcdef"

// One door for every route: each test is an item of the issue
// that failed before, tried as a hostile key holder would.

// call sends method path body with the key, and answers the status and body.
func call(t *testing.T, url, key, method, path, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// burst sends n requests at once and counts the answers by status.
func burst(t *testing.T, n int, send func(i int) int) map[int]int {
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := send(i)
			mu.Lock()
			got[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func TestARateLimitHoldsAcrossEveryRoute(t *testing.T) {
	up := newUsageEngine(t, "demo", 10)
	url := budgetGateway(t, config.Config{
		Keys:    []config.Key{{Name: "team-a", Value: teamKey, Rate: limits(t, "5/m")}},
		Engines: []engines.Config{{Name: "demo", To: up.URL, Models: []string{"demo"}}},
	}, clock.NewFake())
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", `{"model":"demo","messages":[]}`},
		{"GET", "/upstream/demo/props", ""},
		{"POST", "/upstream/demo/v1/chat/completions", `{"model":"demo","messages":[]}`},
		{"GET", "/v1/models", ""},
	}
	got := burst(t, 48, func(i int) int {
		r := routes[i%len(routes)]
		st, _ := call(t, url, teamKey, r.method, r.path, r.body)
		return st
	})
	if got[200] != 5 || got[429] != 43 {
		t.Fatalf("a rate 5/m key across all routes: %v", got)
	}
}

func TestPassthroughObeysTheKeysModelsMethodsAndFilters(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		return r.Method + " " + r.URL.Path + " " + string(b)
	}, answerJSON(`{}`))
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{
			{Name: "team-a", Value: teamKey, Models: []string{"small"}},
			{Name: "team-b", Value: otherKey, Tokens: limits(t, "1000/d")},
			{Name: "ops", Value: opsKey},
		},
		Engines: []engines.Config{
			{Name: "llama", To: upURL, Models: []string{"small", "big"},
				Set: []engines.BodySetting{{Path: "chat_template_kwargs.enable_thinking", Value: json.RawMessage("false")}}},
			{Name: "other", To: upURL, Models: []string{"other"}},
		},
	}, clock.NewFake())
	for _, c := range []struct {
		key, method, path, body string
		status                  int
		code                    string
	}{
		// the path's model, the body's model, the method
		{teamKey, "GET", "/upstream/big/props", "", 403, "model_not_allowed"},
		{teamKey, "POST", "/upstream/small/v1/chat/completions", `{"model":"big"}`, 403, "model_not_allowed"},
		{teamKey, "POST", "/upstream/small/v1/chat/completions", `{"model":"other"}`, 403, "model_not_allowed"},
		{opsKey, "POST", "/upstream/small/v1/chat/completions", `{"model":"other"}`, 400, "model_mismatch"},
		{teamKey, "DELETE", "/upstream/small/v1/files/x", "", 405, "method_not_allowed"},
		{teamKey, "PUT", "/upstream/small/slots/0", "{}", 405, "method_not_allowed"},
		// one spelling per member, here as on /v1/
		{teamKey, "POST", "/upstream/small/v1/chat/completions", `{"model":"small","Model":"big"}`, 400, "ambiguous_member"},
		{teamKey, "POST", "/upstream/small/v1/chat/completions", `{"model":"small","Chat_Template_Kwargs":{"enable_thinking":true}}`, 400, "ambiguous_member"},
		// a key with a token budget only where the operator says so
		{otherKey, "GET", "/upstream/small/props", "", 403, "passthrough_not_allowed"},
		// a restricted key is told only of its own models
		{teamKey, "GET", "/upstream/nope/props", "", 404, "model_not_found"},
	} {
		st, out := call(t, url, c.key, c.method, c.path, c.body)
		if st != c.status || !strings.Contains(out, c.code) || strings.Contains(out, "big, ") || strings.Contains(out, "other") && c.code == "model_not_found" {
			t.Errorf("%s %s %s: %d %s", c.method, c.path, c.body, st, out)
		}
	}
	if len(seen()) != 0 {
		t.Fatalf("refused requests reached the engine: %v", seen())
	}
	st, out := call(t, url, teamKey, "POST", "/upstream/small/v1/chat/completions", `{"model":"small"}`)
	if st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	if want := `POST /v1/chat/completions {"model":"small","chat_template_kwargs":{"enable_thinking":false}}`; seen()[0] != want {
		t.Fatalf("the engine got %q, want its filter applied: %q", seen()[0], want)
	}
}

func TestPassthroughCountsTheUsageItsAnswersReport(t *testing.T) {
	up := newUsageEngine(t, "demo", 600)
	url := budgetGateway(t, config.Config{
		Keys:               []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "1000/d")}},
		Engines:            []engines.Config{{Name: "demo", To: up.URL, Models: []string{"demo"}}},
		PassthroughBudgets: true,
	}, clock.NewFake())
	for i, want := range []int{200, 200, 429} {
		st, out := call(t, url, teamKey, "POST", "/upstream/demo/v1/chat/completions", `{"model":"demo","max_tokens":100}`)
		if st != want {
			t.Fatalf("request %d: %d %s", i+1, st, out)
		}
	}
}

func TestABurstOfStreamsStaysWithinTheTokenBudget(t *testing.T) {
	for _, c := range []struct {
		name, body string
		most       float64
	}{
		{"max_tokens given", `{"model":"demo","stream":true,"max_completion_tokens":905,"messages":[]}`, 1.2},
		{"no max_tokens", `{"model":"demo","stream":true,"messages":[]}`, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newUsageEngine(t, "demo", 905)
			url := budgetGateway(t, config.Config{
				Keys:    []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "1000/d")}},
				Engines: []engines.Config{{Name: "demo", To: up.URL, Models: []string{"demo"}}},
			}, clock.NewFake())
			got := burst(t, 50, func(int) int {
				st, _ := call(t, url, teamKey, "POST", "/v1/chat/completions", c.body)
				return st
			})
			used := 905 * up.calls()
			if float64(used) > c.most*1000 || got[200] == 0 {
				t.Fatalf("%d tokens used of 1000 (%v)", used, got)
			}
			t.Logf("%s: %d tokens used of 1000 by 50 concurrent streams", c.name, used)
		})
	}
}

func TestAPriorityHeaderMayLowerTheKeysNeverRaiseIt(t *testing.T) {
	for _, c := range []struct {
		keyPrio int
		header  string
		want    int
	}{{10, "", 10}, {10, "3", 3}, {10, "50", 10}, {0, "-5", -5}, {0, "junk", 0}} {
		r, _ := http.NewRequest("POST", "/v1/chat/completions", nil)
		if c.header != "" {
			r.Header.Set(PriorityHeader, c.header)
		}
		req := &request{r: r, key: &keys.Rules{Name: "k", Priority: c.keyPrio}}
		var res Result
		withPriority(req, &res)
		if got, key := engines.PriorityOf(req.r.Context()); got != c.want || key != "k" || res.Priority != c.want {
			t.Errorf("key %d, header %q: priority %d (result %d) key %q, want %d", c.keyPrio, c.header, got, res.Priority, key, c.want)
		}
	}
}

func TestARestrictedKeyIsToldOnlyOfItsOwnModelsAndEngines(t *testing.T) {
	up := newUsageEngine(t, "demo", 10)
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"small"}}},
		Engines: []engines.Config{
			{Name: "cheap", To: up.URL, Models: []string{"small"}},
			{Name: "secret-gpu", To: up.URL, Models: []string{"internal-70b"}},
		},
	}, clock.NewFake())
	for _, body := range []string{
		`{"model":"nope","messages":[]}`,
		`{"model":"small","messages":[],"fallbacks":["nowhere"]}`,
	} {
		st, out := call(t, url, teamKey, "POST", "/v1/chat/completions", body)
		if st/100 != 4 || strings.Contains(out, "internal-70b") || strings.Contains(out, "secret-gpu") || !strings.Contains(out, "small") && !strings.Contains(out, "cheap") {
			t.Errorf("%s: %d %s", body, st, out)
		}
	}
}
