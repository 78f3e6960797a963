package provider

import (
	"net/url"
	"slices"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Each provider reads a caller's path as one of its routes, and the model
// it names, as its SDKs write it; a path into another project, a route it
// does not have, or anything else is no route.
func TestEachProviderReadsItsOwnRoutes(t *testing.T) {
	anth, _ := New(&engines.Config{Provider: "anthropic"})
	dep, _ := New(&engines.Config{Provider: "azure", APIVersion: "2024-10-21"})
	v1, _ := New(&engines.Config{Provider: "azure"})
	bed, _ := New(&engines.Config{Provider: "bedrock", Region: "us-east-1"})
	gem, _ := New(&engines.Config{Provider: "gemini"})
	vtx, _ := New(&engines.Config{Provider: "vertex", Project: "proj", Location: "us-central1"})
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-2-1b-instruct-v1:0"
	for _, c := range []struct {
		p           Provider
		tail        string
		name, model string // "" name: no route
	}{
		{anth, "/v1/messages", "messages", ""},
		{anth, "/v1/messages/count_tokens", "count_tokens", ""},
		{anth, "/v1/messages/batches", "", ""},
		{anth, "/v1/files", "", ""},
		{dep, "/openai/deployments/gpt-4o/chat/completions", "chat/completions", "gpt-4o"},
		{dep, "/openai/deployments/gpt-4o/embeddings", "embeddings", "gpt-4o"},
		{dep, "/openai/deployments/gpt-4o/fine_tuning/jobs", "", ""},
		{dep, "/openai/files", "", ""},
		{dep, "/openai/v1/chat/completions", "", ""},
		{v1, "/openai/v1/chat/completions", "chat/completions", ""},
		{v1, "/openai/deployments/gpt-4o/chat/completions", "", ""},
		{bed, "/model/anthropic.claude-v2:0/converse", "converse", "anthropic.claude-v2:0"},
		{bed, "/model/anthropic.claude-v2:0/converse-stream", "converse-stream", "anthropic.claude-v2:0"},
		{bed, "/model/" + arn + "/invoke", "invoke", arn},
		{bed, "/model/x/count-tokens", "count-tokens", "x"},
		{bed, "/model//converse", "", ""},
		{bed, "/async-invoke", "", ""},
		{bed, "/guardrail/g1/version/1/apply", "", ""},
		{gem, "/v1beta/models/gemini-2.5-flash:generateContent", "generateContent", "gemini-2.5-flash"},
		{gem, "/v1/models/gemini-2.5-flash:countTokens", "countTokens", "gemini-2.5-flash"},
		{gem, "/v1beta/tunedModels/mine-1:generateContent", "generateContent", "tunedModels/mine-1"},
		{gem, "/v1beta/models/gemini-2.5-flash", "", ""},
		{gem, "/v1beta/files", "", ""},
		{gem, "/v1beta/models/gemini-2.5-flash:rawPredict", "", ""},
		{gem, "/v1beta/cachedContents", "", ""},
		{vtx, "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", "generateContent", "gemini-2.5-pro"},
		{vtx, "/v1beta1/projects/proj/locations/us-central1/publishers/anthropic/models/claude:streamRawPredict", "streamRawPredict", "publishers/anthropic/models/claude"},
		{vtx, "/v1/projects/other/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", "", ""},
		{vtx, "/v1/projects/proj/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent", "", ""},
		{vtx, "/v1/projects/proj/locations/us-central1/endpoints/123:predict", "", ""},
	} {
		r, ok := c.p.ReadRoute(c.tail)
		if ok != (c.name != "") || r.Name != c.name || r.Model != c.model {
			t.Errorf("%s: %+v %v, want %q %q", c.tail, r, ok, c.name, c.model)
		}
		if ok && !slices.Contains(c.p.Routes(), r.Name) {
			t.Errorf("%s: route %s is not in the provider's list", c.tail, r.Name)
		}
	}
}

// A route goes to the path the provider builds for the model sent, with
// the engine's query and version: nothing of the caller's path.
func TestARouteGoesToTheProvidersPathForTheModelSent(t *testing.T) {
	anth, _ := New(&engines.Config{Provider: "anthropic"})
	dep, _ := New(&engines.Config{Provider: "azure", APIVersion: "2024-10-21"})
	v1, _ := New(&engines.Config{Provider: "azure"})
	bed, _ := New(&engines.Config{Provider: "bedrock", Region: "us-east-1"})
	gem, _ := New(&engines.Config{Provider: "gemini"})
	vtx, _ := New(&engines.Config{Provider: "vertex", Project: "proj", Location: "us-central1"})
	for _, c := range []struct {
		p                 Provider
		base, name, model string
		want              string
	}{
		{anth, "https://api.anthropic.com", "count_tokens", "", "https://api.anthropic.com/v1/messages/count_tokens"},
		{dep, "https://r.openai.azure.com", "embeddings", "emb", "https://r.openai.azure.com/openai/deployments/emb/embeddings?api-version=2024-10-21"},
		{v1, "https://r.openai.azure.com", "chat/completions", "", "https://r.openai.azure.com/openai/v1/chat/completions"},
		{bed, "https://bedrock-runtime.us-east-1.amazonaws.com", "count-tokens", "anthropic.claude-v2:0", "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-v2%3A0/count-tokens"},
		{gem, "https://generativelanguage.googleapis.com", "countTokens", "gemini-2.5-flash", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:countTokens"},
		{gem, "https://generativelanguage.googleapis.com", "streamGenerateContent", "gemini-2.5-flash", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{vtx, "https://us-central1-aiplatform.googleapis.com", "countTokens", "gemini-2.5-pro", "https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:countTokens"},
	} {
		base, _ := url.Parse(c.base)
		u, _ := url.Parse(c.base + "/caller/wrote/this?key=theirs")
		c.p.RouteTarget(u, base, c.name, c.model)
		if u.String() != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.name, c.model, u, c.want)
		}
	}
	if got := Routes("vertex"); !slices.Contains(got, "streamRawPredict") || slices.Contains(Routes("gemini"), "streamRawPredict") {
		t.Errorf("vertex %v, gemini %v", got, Routes("gemini"))
	}
	if Routes("") != nil {
		t.Error("an engine without a provider has routes")
	}
}
