package engines

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"strings"
	"testing"
)

func TestAProviderSetsItsAPIEndpointAndKeyHeader(t *testing.T) {
	for _, c := range []struct {
		cfg                Config
		api, to, keyHeader string
	}{
		{Config{Name: "a", Provider: "anthropic"}, "anthropic", "https://api.anthropic.com", "x-api-key"},
		{Config{Name: "b", Provider: "bedrock", Region: "eu-west-1"}, "converse", "https://bedrock-runtime.eu-west-1.amazonaws.com", ""},
		{Config{Name: "g", Provider: "gemini"}, "gemini", "https://generativelanguage.googleapis.com", "x-goog-api-key"},
		{Config{Name: "v", Provider: "vertex", Project: "p", Location: "us-central1"}, "gemini", "https://us-central1-aiplatform.googleapis.com", ""},
		{Config{Name: "v", Provider: "vertex", Project: "p", Location: "global"}, "gemini", "https://aiplatform.googleapis.com", ""},
		{Config{Name: "z", Provider: "azure", To: "https://r.openai.azure.com"}, "openai", "https://r.openai.azure.com", "api-key"},
		// what the engine says itself wins
		{Config{Name: "t", Provider: "anthropic", To: "http://127.0.0.1:9", APIKeyHeader: "Authorization"}, "anthropic", "http://127.0.0.1:9", "Authorization"},
	} {
		got := c.cfg.WithDefaults()
		if strings.Join(got.APIs, " ") != c.api || got.To != c.to || got.APIKeyHeader != c.keyHeader {
			t.Errorf("provider %s: api %v, to %s, key header %q", c.cfg.Provider, got.APIs, got.To, got.APIKeyHeader)
		}
		if err := c.cfg.Validate(); err != nil && !strings.Contains(err.Error(), "models") {
			t.Errorf("provider %s: %v", c.cfg.Provider, err)
		}
	}
	if v := (Config{Name: "a", Provider: "anthropic"}).WithDefaults().APIVersion; v != api.AnthropicVersion {
		t.Errorf("anthropic-version %q", v)
	}
}

func TestAProviderSaysWhatItNeeds(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Name: "x", Provider: "openrouter"}, "provider takes anthropic, bedrock"},
		{Config{Name: "b", Provider: "bedrock"}, "needs its region"},
		{Config{Name: "v", Provider: "vertex", Location: "us-central1"}, "needs its project and location"},
		{Config{Name: "z", Provider: "azure"}, "needs 'to'"},
		{Config{Name: "c", Provider: "anthropic", Cmd: []string{"x"}}, "has no cmd"},
		{Config{Name: "r", To: "http://127.0.0.1:1", Region: "us-east-1"}, "are for a cloud provider's engine"},
		{Config{Name: "m", To: "http://127.0.0.1:1", AllowMedia: []string{"gs"}}, "allow_media are for a cloud provider's engine"},
		{Config{Name: "g", Provider: "gemini", APIKey: "k", AllowMedia: []string{"gs://"}}, `allow_media takes URL schemes in lower case (gs, http, s3) and file_id, not "gs://"`},
		{Config{Name: "g", Provider: "gemini", APIKey: "k", AllowMedia: []string{"GS"}}, `not "GS"`},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{Name: "g", Provider: "gemini", APIKey: "k", Models: []string{"g"}, AllowMedia: []string{"gs", "s3", "file_id"}}).WithDefaults().Validate(); err != nil {
		t.Errorf("allow_media gs s3 file_id: %v", err)
	}
	t.Setenv("AWS_REGION", "us-west-2")
	if got := (Config{Name: "b", Provider: "bedrock"}).WithDefaults(); got.Region != "us-west-2" || !strings.Contains(got.To, "us-west-2") {
		t.Errorf("AWS_REGION: region %q, to %q", got.Region, got.To)
	}
}
