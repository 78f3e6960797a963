package config

import (
	"fmt"
	"regexp"
	"strings"
)

// IssuedKeys accepts keys issued at run time: created, updated, rotated
// and revoked through Caddy's admin API (/llm_gateway/keys) and the status
// page, without editing the Caddyfile or reloading. Their tokens are kept
// only as keyed hashes, with the counters: in the embedded file under
// Caddy's data directory, or in Redis with `store redis`, where every front
// door sees every change within a second (the keystore package).
type IssuedKeys struct {
	// Secret is the key of the hash (HMAC-SHA256) each issued token is
	// stored as, kept apart from the store, so that the store alone (a
	// copy of the file, a dump of Redis) proves no token. Placeholders such
	// as {env.LLM_KEYS_SECRET} are resolved at load; at least
	// MinSecretLength characters. Default: a random secret generated at
	// the first issue into llm_gateway/keys.secret under Caddy's data
	// directory (a file of its own, mode 0600). Required with a Redis
	// store: every front door needs the same one.
	Secret string `json:"secret,omitempty"`

	// Max is the most keys issued at once; issuing one more is refused
	// until one is revoked. Default: DefaultMaxIssued.
	Max int `json:"max,omitempty"`
}

const (
	// DefaultMaxIssued is how many keys may be issued at once by default.
	DefaultMaxIssued = 1000
	// MinSecretLength is the shortest secret accepted for the issued keys'
	// hash (openssl rand -hex 32 gives 64).
	MinSecretLength = 32
)

// issuedName is what an issued key may be called: a name that is safe in a
// URL path, a metric label and a log line, and never "user:…", the names
// of Caddy's identities.
var issuedName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckIssuedName refuses a name an issued key may not have.
func CheckIssuedName(name string) error {
	if !issuedName.MatchString(name) {
		return fmt.Errorf("a key's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit, not %q", cut(name, 80))
	}
	return nil
}

// validateIssued checks the issued_keys block: a secret long enough, and
// one given where several front doors must share it.
func (c Config) validateIssued() error {
	ik := c.IssuedKeys
	if ik == nil {
		return nil
	}
	if ik.Max < 0 {
		return fmt.Errorf("issued_keys: max may not be negative")
	}
	if ik.Secret == "" && c.Store != nil {
		return fmt.Errorf("issued_keys with store redis needs a secret (secret {env.LLM_KEYS_SECRET}): every front door must hash tokens with the same one, and it must not live in Redis beside the hashes")
	}
	if ik.Secret != "" && !strings.Contains(ik.Secret, "{") && len(ik.Secret) < MinSecretLength {
		return fmt.Errorf("issued_keys: the secret is %d characters long; use at least %d (openssl rand -hex 32)", len(ik.Secret), MinSecretLength)
	}
	return nil
}

// MaxIssued is how many keys may be issued at once.
func (ik *IssuedKeys) MaxIssued() int {
	if ik == nil || ik.Max <= 0 {
		return DefaultMaxIssued
	}
	return ik.Max
}

// cut shortens what an error quotes of a caller's input.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
