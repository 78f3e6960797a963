package engines

import (
	"fmt"

	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// An engine's cloud provider (package providers) sets what its engine
// leaves unset of the API it speaks, where it is and the header its api_key
// goes in, and says what the engine lacks. Its own options (a region, a
// project, an api-version) are its module's; the wire (paths, signatures,
// tokens, framing) is its package's too, used by the handler.

// IsProvider reports whether the engine is a cloud provider's.
func (c *Config) IsProvider() bool { return c.Provider != nil }

// ProviderName is the name of the engine's provider, "" for none.
func (c *Config) ProviderName() string {
	if c.Provider == nil {
		return ""
	}
	return c.Provider.Name()
}

// providerEngine is what the provider reads of the engine and sets.
func (c *Config) providerEngine() providers.Engine {
	return providers.Engine{Name: c.Name, To: c.To, APIs: c.APIs, KeyHeader: c.APIKeyHeader, HasKey: c.APIKey != ""}
}

// withProvider fills in what the engine's provider sets and the engine
// leaves unset. What the provider says the engine lacks is validation's to
// report (validateProvider asks again).
func (c Config) withProvider() Config {
	if c.Provider == nil {
		return c
	}
	e := c.providerEngine()
	_ = c.Provider.Engine(&e)
	c.To, c.APIs, c.APIKeyHeader = e.To, e.APIs, e.KeyHeader
	return c
}

// validateProvider checks what the engine's provider needs.
func (c Config) validateProvider() error {
	if c.Provider == nil {
		if len(c.ProviderRaw) > 0 {
			// the caddy module loads it before anything validates: a
			// config that reaches here unloaded was built another way
			return fmt.Errorf("engine %s: its provider module was never loaded", c.Name)
		}
		if len(c.AllowMedia) > 0 {
			return fmt.Errorf("engine %s: allow_media is for a cloud provider's engine (one with a provider line)", c.Name)
		}
		return nil
	}
	for _, m := range c.AllowMedia {
		if !validMediaKind(m) {
			return fmt.Errorf("engine %s: allow_media takes URL schemes in lower case (gs, http, s3) and file_id, not %q", c.Name, m)
		}
	}
	if c.Managed() {
		return fmt.Errorf("engine %s: a provider's engine is remote: it has no cmd", c.Name)
	}
	e := c.providerEngine()
	if err := c.Provider.Engine(&e); err != nil {
		return fmt.Errorf("engine %s: %v", c.Name, err)
	}
	if _, ok := c.Provider.(providers.Checker); !ok && c.HealthInterval > 0 && c.HealthPath == "" {
		return fmt.Errorf("engine %s: provider %s has no check of its own for health_interval: name a health_path its API answers with 2xx, or leave health checks off (its state comes from its answers)", c.Name, c.ProviderName())
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
