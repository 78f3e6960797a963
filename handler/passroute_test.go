package handler

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/providers/anthropic"
	"github.com/llmgateway/caddy-llm-gateway/providers/azure"
	"github.com/llmgateway/caddy-llm-gateway/providers/gemini"
)

// providerPassConfig is three provider engines behind one upstream, the
// key team-a allowed only gem-flash and az-mini, ops a rule-free key, and
// free a key with a budget and no models line.
func providerPassConfig(to string) config.Config {
	return config.Config{
		Keys: []config.Key{
			{Name: "team-a", Value: teamKey, Models: []string{"gem-flash", "az-mini", "claude"}},
			{Name: "ops", Value: opsKey},
		},
		Engines: []engines.Config{
			{Name: "gem", Provider: new(gemini.Gemini), To: to, APIKey: "gemini-engine-key-0001", Models: []string{"gem-flash"}, ModelName: "gemini-2.5-flash",
				Passthrough: []string{"countTokens", "generateContent", "/v1beta/files*"}},
			{Name: "gem-pro", Provider: new(gemini.Gemini), To: to, APIKey: "gemini-engine-key-0001", Models: []string{"gemini-2.5-pro"}},
			{Name: "az", Provider: &azure.Azure{APIVersion: "2024-10-21"}, To: to, APIKey: "azure-engine-key-0002", Models: []string{"az-mini"}, ModelName: "gpt-4o-mini",
				Passthrough: []string{"embeddings"}},
			{Name: "az-big", Provider: &azure.Azure{APIVersion: "2024-10-21"}, To: to, APIKey: "azure-engine-key-0002", Models: []string{"az-big"}},
			{Name: "anth", Provider: new(anthropic.Anthropic), To: to, APIKey: "anthropic-engine-key-0003", Models: []string{"claude"}, ModelName: "claude-sonnet-4-5"},
		},
	}
}

// On a provider's engine, /upstream/ passes only the routes its
// passthrough line names, for the model the key may use, to the path the
// provider builds; a path the line names goes as written to keys without
// rules; nothing else leaves (issue 51's findings, each a row).
func TestAProviderEnginePassesOnlyTheRoutesItsLineNames(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		return r.Method + " " + r.URL.RequestURI() + " " + string(b)
	}, answerJSON(`{"totalTokens":3}`))
	_, gw := testGateway(t, providerPassConfig(upURL), nil)
	for _, c := range []struct {
		key, method, path, body string
		status                  int
		reached                 string // what the provider was sent; "" nothing
	}{
		// the findings: another model, another deployment, batches, files
		{teamKey, "POST", "/upstream/gem-flash/v1beta/models/gemini-2.5-pro-unconfigured:generateContent", `{"contents":[]}`, 400, ""},
		{teamKey, "POST", "/upstream/gem-flash/v1beta/models/gemini-2.5-pro:generateContent", `{"contents":[]}`, 400, ""},
		{teamKey, "POST", "/upstream/az-mini/openai/deployments/az-big/chat/completions", `{"messages":[]}`, 404, ""},
		{teamKey, "POST", "/upstream/az-mini/openai/deployments/az-big/embeddings", `{"input":"x"}`, 400, ""},
		{teamKey, "POST", "/upstream/claude/v1/messages/batches", `{"requests":[{"custom_id":"a","params":{"model":"claude-opus"}}]}`, 404, ""},
		{opsKey, "POST", "/upstream/claude/v1/messages/batches", `{"requests":[]}`, 404, ""},
		{teamKey, "GET", "/upstream/claude/v1/messages/batches", "", 404, ""},
		{teamKey, "GET", "/upstream/gem-flash/v1beta/files", "", 403, ""},
		{teamKey, "GET", "/upstream/gem-flash/", "", 404, ""},
		{teamKey, "GET", "/upstream/gem-flash/slots", "", 404, ""},
		// routes the line does not name
		{teamKey, "POST", "/upstream/gem-flash/v1beta/models/gemini-2.5-flash:embedContent", `{}`, 404, ""},
		{teamKey, "POST", "/upstream/claude/v1/messages", `{"model":"claude","max_tokens":5,"messages":[]}`, 404, ""},
		// a route's method is POST
		{teamKey, "GET", "/upstream/gem-flash/v1beta/models/gemini-2.5-flash:countTokens", "", 405, ""},
		// what passes: the key's model, by its name or the engine's, to the provider's path
		{teamKey, "POST", "/upstream/gem-flash/v1beta/models/gemini-2.5-flash:countTokens?key=mine&alt=json", `{"contents":[]}`, 200,
			`POST /v1beta/models/gemini-2.5-flash:countTokens {"contents":[]}`},
		{teamKey, "POST", "/upstream/gem-flash/v1/models/gem-flash:generateContent", `{"contents":[]}`, 200,
			`POST /v1beta/models/gemini-2.5-flash:generateContent {"contents":[]}`},
		{teamKey, "POST", "/upstream/az-mini/openai/deployments/gpt-4o-mini/embeddings?api-version=2099-01-01", `{"input":"x"}`, 200,
			`POST /openai/deployments/gpt-4o-mini/embeddings?api-version=2024-10-21 {"input":"x"}`},
		// a path the line names: keys without rules only, as written
		{opsKey, "GET", "/upstream/gem-flash/v1beta/files?pageSize=2", "", 200, `GET /v1beta/files?pageSize=2 `},
	} {
		before := len(seen())
		st, out := call(t, gw, c.key, c.method, c.path, c.body)
		if st != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, st, out, c.status)
		}
		got := seen()[before:]
		switch {
		case c.reached == "" && len(got) != 0:
			t.Errorf("%s %s reached the provider: %v", c.method, c.path, got)
		case c.reached != "" && (len(got) != 1 || got[0] != c.reached):
			t.Errorf("%s %s: the provider got %q, want %q", c.method, c.path, got, c.reached)
		}
		if c.status == 404 && !strings.Contains(out, "passthrough") {
			t.Errorf("%s %s: the 404 does not say how the operator allows it: %s", c.method, c.path, out)
		}
	}
}

// A route whose body names the model needs one the key may use, and the
// engine is sent its own name for it.
func TestAProviderRouteWhoseBodyNamesTheModel(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		return r.URL.Path + " " + r.Header.Get("X-Api-Key") + " " + r.Header.Get("Anthropic-Version") + " " + string(b)
	}, answerJSON(`{"input_tokens":3}`))
	cfg := providerPassConfig(upURL)
	cfg.Engines[4].Passthrough = []string{"count_tokens"}
	_, gw := testGateway(t, cfg, nil)
	if st, out := call(t, gw, teamKey, "POST", "/upstream/claude/v1/messages/count_tokens", `{"messages":[]}`); st != 400 || !strings.Contains(out, "missing_model") {
		t.Fatalf("no model: %d %s", st, out)
	}
	if st, out := call(t, gw, teamKey, "POST", "/upstream/claude/v1/messages/count_tokens", `{"model":"gemini-2.5-pro","messages":[]}`); st != 403 {
		t.Fatalf("another model: %d %s", st, out)
	}
	if st, out := call(t, gw, teamKey, "POST", "/upstream/claude/v1/messages/count_tokens", `{"model":"claude","messages":[]}`); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	if want := `/v1/messages/count_tokens anthropic-engine-key-0003 2023-06-01 {"model":"claude-sonnet-4-5","messages":[]}`; len(seen()) != 1 || seen()[0] != want {
		t.Fatalf("the provider got %q, want %q", seen(), want)
	}
}

// FuzzPassRoute: whatever path a key sends to /upstream/, what reaches a
// provider's engine is one of the routes its line names, at the path the
// provider builds for the engine's model, which the key may use; never a
// model, deployment, project or path the caller wrote.
func FuzzPassRoute(f *testing.F) {
	for _, s := range []string{
		"gem-flash/v1beta/models/gemini-2.5-flash:countTokens",
		"gem-flash/v1beta/models/gemini-2.5-pro:countTokens",
		"gem-flash/v1beta/models/gemini-2.5-flash:countTokens/../x",
		"gem-flash/v1beta/tunedModels/x:generateContent",
		"gem-flash/v1beta/files/abc",
		"az-mini/openai/deployments/gpt-4o-mini/embeddings",
		"az-mini/openai/deployments/az-big/embeddings",
		"az-mini/openai/deployments/gpt-4o-mini/x/embeddings",
		"claude/v1/messages",
		"gemini-2.5-pro/v1beta/models/gemini-2.5-pro:countTokens",
	} {
		f.Add(s, true)
	}
	up := "http://127.0.0.1:1"
	cfg := providerPassConfig(up).WithDefaults()
	var es []*engines.Engine
	for _, ec := range cfg.Engines {
		e, err := engines.New(ec, &http.Transport{}, zap.NewNop())
		if err != nil {
			f.Fatal(err)
		}
		es = append(es, e)
	}
	g, err := New(cfg, es, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	ring := keys.NewRing(cfg.Keys)
	base, _ := url.Parse(up)
	f.Fuzz(func(t *testing.T, rest string, team bool) {
		kr := ring.Rules[1] // ops: no rules
		if team {
			kr = ring.Rules[0]
		}
		p := config.UpstreamPrefix + rest
		u, err := url.Parse(p)
		if err != nil || !config.CleanPath(strings.TrimSuffix(u.Path, "/")) {
			return // refused at the door
		}
		rt, model, tail := g.upstreamTarget(u.Path)
		if rt == nil || !kr.Allows(model) {
			return
		}
		r, _ := http.NewRequest(http.MethodPost, "http://gw"+p, nil)
		pr, gerr := g.passRouteOf(r, kr, rt, model, tail)
		if gerr != nil {
			return
		}
		in := r.Clone(r.Context())
		in.URL.Path, in.URL.RawPath = tail, ""
		out := upstream.NewRequest(r.Context(), in, base, &rt.cfg, nil)
		if err := pr.target(rt, out, base, nil); err != nil {
			t.Fatal(err)
		}
		if pr.name == "" { // a path the line names: only for keys without rules
			if !kr.RuleFree() || !slices.ContainsFunc(rt.cfg.Passthrough, func(item string) bool { return config.IsPathItem(item) && config.MatchesPath(item, tail) }) {
				t.Fatalf("%s passed as written for key %s", p, kr.Name)
			}
			return
		}
		if !slices.Contains(rt.cfg.Passthrough, pr.name) {
			t.Fatalf("%s reached route %s, which engine %s's line does not name", p, pr.name, rt.cfg.Name)
		}
		// the one path the route has for the engine's model, which the key may use
		want := *base
		rt.passer().RouteTarget(&want, base, pr.name, rt.cfg.ModelName)
		if out.URL.String() != want.String() || rt.cfg.ModelName == "" {
			t.Fatalf("%s reached %s, want %s", p, out.URL, want.String())
		}
		if !slices.ContainsFunc(rt.cfg.Models, kr.Allows) {
			t.Fatalf("%s reached engine %s, none of whose models key %s may use", p, rt.cfg.Name, kr.Name)
		}
	})
}
