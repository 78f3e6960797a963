package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// The door, round 3, through Caddy: /upstream/ on a provider's engine,
// tried by a key allowed one model of each provider, against the fakes of
// each (internal/providertest), which refuse — and fail the test — any
// path, key or signature the provider would refuse. Before, the rest of
// the path went to the provider with the operator's credentials: another
// Gemini model, another Azure deployment, Anthropic's batches, a Vertex
// project, each answered.
func TestUpstreamReachesOnlyTheRoutesAProviderEngineNames(t *testing.T) {
	pvEnv(t)
	gem := providertest.Gemini(t, "ok")
	az := providertest.Azure(t, "ok")
	anth := providertest.Anthropic(t, "ok")
	bed := providertest.Bedrock(t, "ok")
	vtx := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"batchPredictionJobs":[]}`)) })
	const team, ops = "team-key-0123456789abcdef", "ops-key-0123456789abcdefg"
	startGateway(t, fmt.Sprintf(`
		key team %s {
			models gem-flash az-mini claude br vx
		}
		key ops %s
		engine gem {
			provider gemini
			to %s
			api_key {env.PV_GEMINI_KEY}
			models gem-flash
			model_name %s
			passthrough generateContent
		}
		engine gem-pro {
			provider gemini
			to %s
			api_key {env.PV_GEMINI_KEY}
			models gemini-2.5-pro
		}
		engine az {
			provider azure
			to %s
			api_key {env.PV_AZURE_KEY}
			api_version %s
			models az-mini
			model_name %s
			passthrough chat/completions
		}
		engine az-big {
			provider azure
			to %s
			api_key {env.PV_AZURE_KEY}
			api_version %s
			models az-big
		}
		engine anth {
			provider anthropic
			to %s
			api_key {env.PV_ANTHROPIC_KEY}
			models claude
			model_name %s
			passthrough messages
		}
		engine br {
			provider bedrock
			region us-east-1
			to %s
			models br
			model_name %s
			passthrough converse
		}
		engine vx {
			provider vertex
			project proj
			location us-central1
			to %s
			api_key vertex-engine-key-0123456789
			models vx
			passthrough generateContent /v1/projects/proj/locations/us-central1/batchPredictionJobs*
		}`, team, ops, gem.URL, providertest.GeminiModel, gem.URL, az.URL, providertest.AzureAPIVersion, providertest.AzureDeployment, az.URL, providertest.AzureAPIVersion,
		anth.URL, providertest.ClaudeModel, bed.URL, providertest.BedrockModel, vtx.URL))

	contents := `{"contents":[{"role":"user","parts":[{"text":"Hello!"}]}]}`
	chat := `{"model":"az-mini","messages":[{"role":"user","content":"Hello!"}]}`
	converse := `{"messages":[{"role":"user","content":[{"text":"Hello!"}]}]}`
	for _, c := range []struct {
		key, method, path, body string
		want                    int
	}{
		// the findings: none reaches a provider
		{team, "POST", "/upstream/gem-flash/v1beta/models/gemini-2.5-pro-unconfigured:generateContent", contents, 400},
		{team, "POST", "/upstream/gem-flash/v1beta/models/gemini-2.5-pro:generateContent", contents, 400},
		{team, "GET", "/upstream/gem-flash/v1beta/files", "", 404},
		{team, "POST", "/upstream/az-mini/openai/deployments/az-big/chat/completions", chat, 400},
		{team, "POST", "/upstream/claude/v1/messages/batches", `{"requests":[{"custom_id":"a","params":{"model":"claude-opus-4","max_tokens":5,"messages":[]}}]}`, 404},
		{ops, "GET", "/upstream/claude/v1/messages/batches", "", 404},
		{team, "POST", "/upstream/br/model/anthropic.claude-opus-unconfigured/converse", converse, 400},
		{team, "POST", "/upstream/vx/v1/projects/other/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", contents, 404},
		{team, "GET", "/upstream/vx/v1/projects/proj/locations/us-central1/batchPredictionJobs", "", 403},
		{team, "GET", "/upstream/gem-flash/slots", "", 404},
		// what the engines' lines pass: for the key's model, to the provider's path, with its credentials
		{team, "POST", "/upstream/gem-flash/v1beta/models/" + providertest.GeminiModel + ":generateContent", contents, 200},
		{team, "POST", "/upstream/gem-flash/v1beta/models/gem-flash:generateContent?key=mine", contents, 200},
		{team, "POST", "/upstream/az-mini/openai/deployments/" + providertest.AzureDeployment + "/chat/completions?api-version=2099-01-01", chat, 200},
		{team, "POST", "/upstream/claude/v1/messages", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"Hello!"}]}`, 200},
		{team, "POST", "/upstream/br/model/" + providertest.BedrockModel + "/converse", converse, 200},
		{ops, "GET", "/upstream/vx/v1/projects/proj/locations/us-central1/batchPredictionJobs", "", 200},
	} {
		req, _ := http.NewRequest(c.method, gwURL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Content-Type", "application/json")
		resp, out := do(t, req)
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, out, c.want)
		}
		if c.want == 404 && !strings.Contains(out, "passthrough") {
			t.Errorf("%s %s: the 404 does not say how the operator passes it: %s", c.method, c.path, out)
		}
	}
	// each fake got what passed, and only that (a wrong path, key or
	// signature failed the test as the fake refused it)
	for name, n := range map[string]int{"gemini": gem.N(), "azure": az.N(), "anthropic": anth.N(), "bedrock": bed.N(), "vertex": len(vtx.all())} {
		want := map[string]int{"gemini": 2, "azure": 1, "anthropic": 1, "bedrock": 1, "vertex": 1}[name]
		if n != want {
			t.Errorf("%s was sent %d requests, want %d", name, n, want)
		}
	}
	if got := anth.All()[0].Body; !strings.Contains(string(got), `"model":"`+providertest.ClaudeModel+`"`) {
		t.Errorf("anthropic got %s: the model is the engine's", got)
	}
	if got := vtx.all()[0]; got.path != "/v1/projects/proj/locations/us-central1/batchPredictionJobs" || got.header.Get("Authorization") != "Bearer vertex-engine-key-0123456789" {
		t.Errorf("vertex got %s %v", got.path, got.header)
	}
}
