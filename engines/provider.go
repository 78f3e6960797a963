package engines

import (
	"fmt"
	"github.com/llmgateway/caddy-llm-gateway/api"
	"os"
	"strings"
)

// What `provider` sets on an engine: the API it speaks, where it is, and
// the header its api_key goes in. The wire itself (paths, signatures,
// tokens, framing) is handler/provider's.

// providerDefaults is one provider's part of an engine's config.
type providerDefaults struct {
	api       string // the `api` it speaks
	to        string // its endpoint; {region} and {location} filled in
	keyHeader string // where api_key goes ("": Authorization: Bearer)
}

var providers = map[string]providerDefaults{
	"anthropic": {api: "anthropic", to: "https://api.anthropic.com", keyHeader: "x-api-key"},
	"bedrock":   {api: "converse", to: "https://bedrock-runtime.{region}.amazonaws.com"},
	"gemini":    {api: "gemini", to: "https://generativelanguage.googleapis.com", keyHeader: "x-goog-api-key"},
	"vertex":    {api: "gemini", to: "https://{location}-aiplatform.googleapis.com"},
	"azure":     {api: "openai", keyHeader: "api-key"},
}

// IsProvider reports whether name is a provider `provider` takes.
func IsProvider(name string) bool {
	_, ok := providers[name]
	return ok
}

// ProviderNames are the names `provider` takes.
const ProviderNames = "anthropic, bedrock, gemini, vertex and azure"

// withProvider fills in what the engine's provider sets and the engine
// leaves unset.
func (c Config) withProvider() Config {
	p, ok := providers[c.Provider]
	if !ok {
		return c
	}
	if len(c.APIs) == 0 {
		c.APIs = []string{p.api}
	}
	if c.APIKeyHeader == "" {
		c.APIKeyHeader = p.keyHeader
	}
	if c.Provider == "bedrock" && c.Region == "" {
		c.Region = os.Getenv("AWS_REGION")
		if c.Region == "" {
			c.Region = os.Getenv("AWS_DEFAULT_REGION")
		}
	}
	if c.Provider == "anthropic" && c.APIVersion == "" {
		c.APIVersion = api.AnthropicVersion
	}
	if c.To == "" && p.to != "" {
		to := strings.ReplaceAll(p.to, "{region}", c.Region)
		if c.Location == "global" {
			to = "https://aiplatform.googleapis.com"
		}
		c.To = strings.ReplaceAll(to, "{location}", c.Location)
	}
	return c
}

// validateProvider checks what the engine's provider needs.
func (c Config) validateProvider() error {
	if c.Provider == "" {
		if c.Region != "" || c.Project != "" || c.Location != "" || c.APIVersion != "" || len(c.AllowMedia) > 0 {
			return fmt.Errorf("engine %s: region, project, location, api_version and allow_media are for a cloud provider's engine (provider %s)", c.Name, ProviderNames)
		}
		return nil
	}
	for _, m := range c.AllowMedia {
		if !validMediaKind(m) {
			return fmt.Errorf("engine %s: allow_media takes URL schemes in lower case (gs, http, s3) and file_id, not %q", c.Name, m)
		}
	}
	if _, ok := providers[c.Provider]; !ok {
		return fmt.Errorf("engine %s: provider takes %s, not %q", c.Name, ProviderNames, c.Provider)
	}
	if c.Managed() {
		return fmt.Errorf("engine %s: a provider's engine is remote: it has no cmd", c.Name)
	}
	switch c.Provider {
	case "bedrock":
		if c.Region == "" { // SigV4's scope names it, whatever `to` is
			return fmt.Errorf("engine %s: provider bedrock needs its region (region us-east-1, or AWS_REGION)", c.Name)
		}
	case "vertex":
		if c.Project == "" || c.Location == "" {
			return fmt.Errorf("engine %s: provider vertex needs its project and location (project my-project, location us-central1)", c.Name)
		}
	case "azure":
		if c.To == "" {
			return fmt.Errorf("engine %s: provider azure needs 'to', the resource's endpoint (https://<resource>.openai.azure.com)", c.Name)
		}
	}
	return nil
}

// validMediaKind reports whether m is what allow_media takes: file_id, or
// a URL scheme in lower case (RFC 3986: a letter, then letters, digits,
// '+', '-' and '.').
func validMediaKind(m string) bool {
	if m == "file_id" {
		return true
	}
	for i, ch := range m {
		switch {
		case 'a' <= ch && ch <= 'z':
		case i > 0 && ('0' <= ch && ch <= '9' || ch == '+' || ch == '-' || ch == '.'):
		default:
			return false
		}
	}
	return m != ""
}
