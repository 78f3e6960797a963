// Package statuspage is the operators' page of llm_gateway: every engine and
// pool, buttons that start and stop engines, an engine's live output and the
// recent requests, pushed to the browser as server-sent events. The page is
// plain HTML, CSS and JavaScript embedded in the binary; it loads nothing
// from another origin.
//
// The caddy module mounts one Server on a site (behind the gateway's keys,
// `ui /llm`) and one on Caddy's admin endpoint (no key); both read the same
// process-wide Board of recent requests.
package statuspage

import (
	"fmt"
	"strings"
)

// DefaultRecent is how many recent requests the page shows by default.
const DefaultRecent = 200

// maxRecent caps `recent`: the list is kept in memory and sent whole to a
// page that connects.
const maxRecent = 10000

// Config is the `ui` subdirective of llm_gateway.
type Config struct {
	// Path is where the page is mounted on the site, e.g. "/llm". It is
	// served behind the gateway's keys. Required.
	Path string `json:"path"`

	// Keys are the operators' tokens: only they may use the page's API
	// (engine actions, key resets, other keys' usage, engines' output).
	// Placeholders are resolved at load. Default: the handler's keys
	// marked operator, else its keys without rules; a key with rules is
	// never an operator.
	Keys []string `json:"keys,omitempty"`

	// Recent is how many recent requests are kept and shown. Default: 200.
	Recent int `json:"recent,omitempty"`
}

// Validate checks the path and the size of the list.
func (c Config) Validate() error {
	p := c.Path
	if !strings.HasPrefix(p, "/") || p == "/" || strings.HasSuffix(p, "/") {
		return fmt.Errorf("ui path %q: want a path such as /llm (starting with /, not / itself, no trailing /)", p)
	}
	if p == "/v1" || strings.HasPrefix(p, "/v1/") {
		return fmt.Errorf("ui path %q is under /v1, where the API is served", p)
	}
	if strings.ContainsAny(p, "?#*{} ") {
		return fmt.Errorf("ui path %q: a plain path, without placeholders or query", p)
	}
	if c.Recent < 0 || c.Recent > maxRecent {
		return fmt.Errorf("ui recent %d: want 1 to %d", c.Recent, maxRecent)
	}
	return nil
}

// RecentOrDefault is the size of the recent-requests list.
func (c Config) RecentOrDefault() int {
	if c.Recent == 0 {
		return DefaultRecent
	}
	return c.Recent
}
