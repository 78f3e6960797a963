package handler

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// Key is one bearer token the gateway accepts.
type Key struct {
	// Name labels the key in logs and metrics (never the key itself).
	// Default: "" (unnamed).
	Name string `json:"name,omitempty"`

	// Value is the token; placeholders such as {env.GATEWAY_KEYS} are
	// resolved at provision time, and a value that expands to several
	// tokens separated by commas or spaces accepts each of them.
	Value string `json:"value"`
}

// keyring checks callers' tokens. Tokens are compared as SHA-256 digests with
// subtle.ConstantTimeCompare against every key, so neither a token's length
// nor which key it matched shows in the timing.
type keyring struct {
	digests [][sha256.Size]byte
	names   []string
}

func newKeyring(keys []Key) *keyring {
	if len(keys) == 0 {
		return nil
	}
	k := &keyring{}
	for _, key := range keys {
		k.digests = append(k.digests, sha256.Sum256([]byte(key.Value)))
		k.names = append(k.names, key.Name)
	}
	return k
}

// check returns the matching key's name and whether the request carries a
// valid key. A nil keyring accepts everyone.
func (k *keyring) check(r *http.Request) (string, bool) {
	if k == nil {
		return "", true
	}
	token := callerToken(r.Header)
	if token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range k.digests {
		if subtle.ConstantTimeCompare(d[:], k.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", false
	}
	return k.names[match], true
}

// callerToken finds the caller's key where the OpenAI SDKs (Authorization:
// Bearer), Anthropic's (X-Api-Key) and Azure's (Api-Key) put it.
func callerToken(h http.Header) string {
	if v := h.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	if v := h.Get("X-Api-Key"); v != "" {
		return v
	}
	return h.Get("Api-Key")
}

// CheckKey refuses a configured key that is empty or too short. A value
// that holds several tokens is checked token by token; an empty token ("a,")
// is a mistake too, not something to drop.
func CheckKey(k Key) error {
	if strings.Contains(k.Value, "{") {
		return nil // a placeholder: checked once it is resolved, at provision
	}
	for _, item := range strings.Split(k.Value, ",") {
		toks := strings.Fields(item)
		if len(toks) == 0 {
			return fmt.Errorf("a gateway key (or an item of a key list) is empty: a stray comma, or an unset variable?")
		}
		for _, tok := range toks {
			if len(tok) < MinKeyLength {
				return fmt.Errorf("a gateway key is %d characters long; use at least %d (openssl rand -hex 24)", len(tok), MinKeyLength)
			}
		}
	}
	return nil
}

// SplitKeys expands key values that hold several tokens ("a,b c") into one
// Key each, keeping the name. Empty tokens are dropped.
func SplitKeys(keys []Key) []Key {
	var out []Key
	for _, k := range keys {
		for _, tok := range strings.FieldsFunc(k.Value, func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\n'
		}) {
			out = append(out, Key{Name: k.Name, Value: tok})
		}
	}
	return out
}
