package handler

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// keyRules are a named key's rules at runtime.
type keyRules struct {
	name       string
	allowed    map[string]bool // nil: every model
	models     []string        // allowed, in config order
	limits     quota.Rules
	overBudget string // the model served once a token budget is spent
	reserveN   int64  // Key.Reserve
	priority   int    // Key.Priority
}

// reserve is what a request that names no maximum answer reserves.
func (kr *keyRules) reserve() int64 {
	if kr == nil || kr.reserveN <= 0 {
		return config.DefaultReserve
	}
	return kr.reserveN
}

// allows reports whether the key may use model (a model, alias or pool).
func (kr *keyRules) allows(model string) bool {
	return kr == nil || kr.allowed == nil || kr.allowed[model]
}

// keyring checks callers' tokens. Tokens are compared as SHA-256 digests with
// subtle.ConstantTimeCompare against every key, so neither a token's length
// nor which key it matched shows in the timing.
type keyring struct {
	digests [][sha256.Size]byte
	rules   []*keyRules // per digest; every token of a name shares one
}

func newKeyring(keys []config.Key) *keyring {
	if len(keys) == 0 {
		return nil
	}
	k := &keyring{}
	byName := map[string]*keyRules{}
	for _, key := range keys {
		k.digests = append(k.digests, sha256.Sum256([]byte(key.Value)))
		kr := byName[key.Name]
		if kr == nil || key.Name == "" {
			kr = &keyRules{name: key.Name, limits: key.Rules(), overBudget: key.OverBudgetFallback, reserveN: key.Reserve, priority: key.Priority}
			if len(key.Models) > 0 {
				kr.allowed, kr.models = map[string]bool{}, key.Models
				for _, m := range key.Models {
					kr.allowed[m] = true
				}
			}
			byName[key.Name] = kr
		}
		k.rules = append(k.rules, kr)
	}
	return k
}

// check returns the matching key's rules and whether the request carries a
// valid key. A nil keyring accepts everyone (with no rules).
func (k *keyring) check(r *http.Request) (*keyRules, bool) {
	if k == nil {
		return nil, true
	}
	token := callerToken(r.Header)
	if token == "" {
		return nil, false
	}
	d := sha256.Sum256([]byte(token))
	match := -1
	for i := range k.digests {
		if subtle.ConstantTimeCompare(d[:], k.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return nil, false
	}
	return k.rules[match], true
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

// only is names less those the key may not use: a restricted key's errors
// list what it may ask for, not every model and engine of the gateway.
func (kr *keyRules) only(names []string) []string {
	if kr == nil || kr.allowed == nil {
		return names
	}
	var out []string
	for _, n := range names {
		if kr.allowed[n] {
			out = append(out, n)
		}
	}
	return out
}
