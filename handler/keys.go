package handler

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/quota"
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

	// Models are the models and pools this key may use; a request for
	// another gets 403 model_not_allowed, and /v1/models lists only these.
	// Needs a name. Default: all.
	Models []string `json:"models,omitempty"`

	// Rate are request limits of this key, such as "60/m"; several
	// combine. Needs a name: every token of the name shares them.
	// Default: none.
	Rate []quota.Limit `json:"rate,omitempty"`

	// Tokens are token budgets (prompt and completion) of this key, such
	// as "200k/d" or "5M/mo". Default: none.
	Tokens []quota.Limit `json:"tokens,omitempty"`

	// Reserve is what a request of this key that names no max_tokens (nor
	// max_completion_tokens, max_output_tokens) reserves of its token
	// budget for its answer while it is in flight. Default: 1024.
	Reserve int64 `json:"reserve,omitempty"`

	// Priority orders this key's requests in an engine's queue and in the
	// scheduler's turns: higher first; equal priorities take turns by key.
	// A request may lower its own with an X-LLM-Priority header, never
	// raise it. Default: 0.
	Priority int `json:"priority,omitempty"`

	// Operator marks a key that may use the status page's API: engine
	// actions, key resets, other keys' usage and engines' output. A key
	// with rules is never one. Default: false (see statuspage.Config.Keys).
	Operator bool `json:"operator,omitempty"`

	// OverBudgetFallback is the model a request goes to once a token
	// budget is spent, instead of a 429 insufficient_quota. Default: ""
	// (refuse).
	OverBudgetFallback string `json:"over_budget_fallback,omitempty"`
}

// hasRules reports whether the key carries rules beyond its token.
func (k Key) hasRules() bool {
	return len(k.Models) > 0 || len(k.Rate) > 0 || len(k.Tokens) > 0 || k.OverBudgetFallback != "" || k.Reserve != 0
}

// rules are the key's limits, as the quota package counts them.
func (k Key) rules() quota.Rules { return quota.Rules{Rate: k.Rate, Tokens: k.Tokens} }

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

// DefaultReserve is what a request that names no maximum answer reserves.
const DefaultReserve = 1024

// reserve is what a request that names no maximum answer reserves.
func (kr *keyRules) reserve() int64 {
	if kr == nil || kr.reserveN <= 0 {
		return DefaultReserve
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

func newKeyring(keys []Key) *keyring {
	if len(keys) == 0 {
		return nil
	}
	k := &keyring{}
	byName := map[string]*keyRules{}
	for _, key := range keys {
		k.digests = append(k.digests, sha256.Sum256([]byte(key.Value)))
		kr := byName[key.Name]
		if kr == nil || key.Name == "" {
			kr = &keyRules{name: key.Name, limits: key.rules(), overBudget: key.OverBudgetFallback, reserveN: key.Reserve, priority: key.Priority}
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
			k := k
			k.Value = tok
			out = append(out, k)
		}
	}
	return out
}

// OperatorTokens are the tokens that may use the status page's API when
// the page names no operator keys of its own: the keys marked operator, or,
// when none is, every key without rules. A key with rules (models, rates,
// budgets) is never an operator: it could reset its own budget, stop every
// engine and read other teams' usage and engines' output (issue 24).
func OperatorTokens(keys []Key) []string {
	marked := slices.ContainsFunc(keys, func(k Key) bool { return k.Operator })
	var out []string
	for _, k := range SplitKeys(keys) {
		if k.hasRules() || marked && !k.Operator {
			continue
		}
		out = append(out, k.Value)
	}
	return out
}

// checkKeys refuses what makes a key's rules depend on the order of the
// config: one token under two names (or in keys and in a key block), and an
// operator with rules. Tokens are compared, never printed.
func checkKeys(keys []Key) error {
	seen := map[string]Key{}
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return err
		}
		if k.Operator && k.hasRules() {
			return &ConfigError{Key: k.Name, Err: fmt.Errorf("key %s is marked operator and has rules: a key with rules is never an operator (give the operator a key of its own)", k.Name)}
		}
		for _, tok := range SplitKeys([]Key{k}) {
			if strings.Contains(tok.Value, "{") {
				continue // a placeholder: compared once it is resolved
			}
			if prev, ok := seen[tok.Value]; ok {
				return &ConfigError{Key: k.Name, Err: fmt.Errorf("one token is given twice, as %s and as %s: its rules would depend on the order; give each a token of its own", keyLabel(prev), keyLabel(k))}
			}
			seen[tok.Value] = k
		}
	}
	return nil
}

func keyLabel(k Key) string {
	if k.Name == "" {
		return "an unnamed key (keys …)"
	}
	return "key " + k.Name
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
