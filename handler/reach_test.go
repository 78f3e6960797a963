package handler

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// The door's second attack found it: a body fallback was checked by its engine
// only, never by the model it sends.
func TestEveryCandidateIsAModelTheKeyMayUse(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	down, _ := failing(t)
	_, url := testGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"x", "shared-ok"}}},
		Engines: []engines.Config{
			{Name: "x", To: down.URL, Models: []string{"x"}, Fallback: "secret", ContextFallback: "secret"},
			{Name: "shared", To: laxURL, Models: []string{"shared-secret", "shared-ok"}},
			{Name: "secret", To: laxURL, Models: []string{"secret"}},
		},
	}, nil)
	for _, fb := range []string{`["shared/shared-secret"]`, `["secret"]`, `["secret/secret"]`} {
		st, body := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"x","messages":[],"fallbacks":`+fb+`}`)
		if st != http.StatusForbidden {
			t.Errorf("fallbacks %s: %d %s", fb, st, body)
		}
	}
	// the engine's own fallback serves a model the key may not use: skipped
	if st, body := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"x","messages":[]}`); st == 200 {
		t.Errorf("x failed over to its fallback secret: %d %s", st, body)
	}
	for _, r := range lax.Ran() {
		t.Errorf("the engine ran %q", r.Model)
	}
	// a bare engine serves the first of its names the key may use
	st, body := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"x","messages":[],"fallbacks":["shared"]}`)
	if ran := lax.Ran(); st != 200 || len(ran) != 1 || ran[0].Model != "shared-ok" {
		t.Fatalf("%d %s: ran %v", st, body, ran)
	}
}

func TestAConfiguredFallbackServesAKeyThatMayUseIt(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	down, _ := failing(t)
	_, url := testGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"x", "spare"}}},
		Engines: []engines.Config{
			{Name: "x", To: down.URL, Models: []string{"x"}, Fallback: "spare"},
			{Name: "spare", To: laxURL, Models: []string{"spare"}},
		},
	}, nil)
	if st, body := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"x","messages":[]}`); st != 200 || len(lax.Ran()) != 1 {
		t.Fatalf("%d %s", st, body)
	}
}

// A key that is over its budget reaches the over_budget model alone: its
// body's fallbacks went with the request it was over budget for.
func TestARequestOverBudgetReachesTheCheaperModelAlone(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	down, _ := failing(t)
	url := budgetGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"big", "small"}, Tokens: limits(t, "100/d"), OverBudgetFallback: "small"}},
		Engines: []engines.Config{
			{Name: "big", To: laxURL, Models: []string{"big"}},
			{Name: "small", To: down.URL, Models: []string{"small"}, Retries: new(0)}, // no back-off on the fake clock
		},
	}, clock.NewFake())
	if st, out := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"big","max_tokens":200,"messages":[]}`); st != 200 {
		t.Fatalf("%d %s", st, out) // alone, it may spend the budget
	}
	st, out := call(t, url, teamKey, "POST", "/v1/chat/completions", `{"model":"big","max_tokens":10,"messages":[],"fallbacks":["big"]}`)
	if st == 200 || len(lax.Ran()) != 1 {
		t.Fatalf("over budget, its fallback big answered: %d %s (big ran %d times)", st, out, len(lax.Ran()))
	}
}

// Only an operator's key reaches an engine's slots on /upstream/: they hold
// other callers' conversations. A key with a budget and no models line read
// them all (issue 51), and so did a key without rules beside a key marked
// operator.
func TestOnlyAnOperatorReachesAnEnginesSlots(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string { return r.URL.Path }, answerJSON(`[]`))
	plain := "plain-key-0123456789ab"
	_, url := testGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"x"}}, {Name: "free", Value: otherKey, Tokens: limits(t, "1M/d")},
			{Name: "plain", Value: plain}, {Name: "ops", Value: opsKey, Operator: true}},
		Engines:            []engines.Config{{Name: "x", To: upURL, Models: []string{"x"}}},
		PassthroughBudgets: true,
	}, nil)
	for _, key := range []string{teamKey, otherKey, plain} {
		for _, p := range []string{"/upstream/x/slots", "/upstream/x/slots/0?action=save"} {
			if st, out := call(t, url, key, "GET", p, ""); st != http.StatusForbidden || !strings.Contains(out, "passthrough_not_allowed") {
				t.Errorf("%s: %d %s", p, st, out)
			}
		}
	}
	if len(seen()) != 0 {
		t.Fatalf("the engine was asked %v", seen())
	}
	if st, out := call(t, url, opsKey, "GET", "/upstream/x/slots", ""); st != 200 {
		t.Fatalf("the operator: %d %s", st, out)
	}
}

// Only an operator's key may pick a llama-server slot: one can hold another
// caller's cached prompt, and its reuse shows in the timings.
func TestOnlyAnOperatorMayPickAnEngineSlot(t *testing.T) {
	lax, laxURL := laxUpstream(t)
	_, url := testGateway(t, config.Config{
		Keys:    []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"x"}}, {Name: "free", Value: otherKey, Rate: limits(t, "100/m")}, {Name: "ops", Value: opsKey}},
		Engines: []engines.Config{{Name: "x", To: laxURL, Models: []string{"x"}}},
	}, nil)
	body := `{"model":"x","id_slot":0,"messages":[]}`
	for _, key := range []string{teamKey, otherKey} {
		if st, out := call(t, url, key, "POST", "/v1/chat/completions", body); st != http.StatusForbidden || !strings.Contains(out, "slot_not_allowed") {
			t.Fatalf("%d %s", st, out)
		}
		if st, out := call(t, url, key, "POST", "/upstream/x/completion", body); st != http.StatusForbidden {
			t.Fatalf("on /upstream/: %d %s", st, out)
		}
	}
	if len(lax.Ran()) != 0 {
		t.Fatalf("the engine ran %v", lax.Ran())
	}
	if st, out := call(t, url, opsKey, "POST", "/v1/chat/completions", body); st != 200 {
		t.Fatalf("the operator: %d %s", st, out)
	}
}

// A key with rules reaches under /v1/ of an engine's /upstream/ only the
// APIs' routes, as on /v1/: an engine sent the
// operator's key (a cloud's OpenAI API without a provider line) listed the
// account's files to a key allowed one model.
func TestUpstreamHoldsAKeyWithRulesToTheRoutesByName(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string { return r.URL.Path }, answerJSON(`{}`))
	plain := "plain-key-0123456789ab"
	_, url := testGateway(t, config.Config{
		Keys:    []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"x"}}, {Name: "plain", Value: plain}},
		Engines: []engines.Config{{Name: "x", To: upURL, APIKey: "engine-key-abcdefgh", Models: []string{"x"}, Routes: []string{"/v1/batches"}}},
	}, nil)
	for _, c := range []struct {
		key, method, path string
		want              int
	}{
		{teamKey, "GET", "/upstream/x/v1/files", 403},
		{teamKey, "GET", "/upstream/x//v1/./files/", 400}, // the door refuses dot segments
		{teamKey, "GET", "/upstream/x/props/../v1/files", 400},
		{teamKey, "POST", "/upstream/x/v1/fine_tuning/jobs", 403},
		{teamKey, "GET", "/upstream/x/V1/Files", 403},
		{teamKey, "GET", "/upstream/x/v1/batches", 403}, // a named route: keys without rules only, as on /v1/
		{teamKey, "GET", "/upstream/x/props", 200},      // the engine's own page
		{teamKey, "GET", "/upstream/x/v1/models", 403},  // no API's route: the gateway's /v1/models answers it
		{plain, "GET", "/upstream/x/v1/files", 200},     // a key without rules, as before
	} {
		st, out := call(t, url, c.key, c.method, c.path, "")
		if st != c.want || (st == 403 && !strings.Contains(out, "route_not_allowed")) {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, st, out, c.want)
		}
		if strings.Contains(out, "engine-key") {
			t.Errorf("%s: the refusal holds the engine's key: %s", c.path, out)
		}
	}
	files := 0
	for _, p := range seen() {
		if strings.Contains(p, "files") {
			files++
		}
		if strings.Contains(p, "fine_tuning") || files > 1 {
			t.Errorf("the engine was asked %s (%v)", p, seen())
		}
	}
}
