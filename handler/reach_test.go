package handler

import (
	"net/http"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
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
