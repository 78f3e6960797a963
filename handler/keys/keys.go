// Package keys checks a caller's key and holds its rules at runtime: the
// models it may use, its limits, and the refusals and rate headers they
// make.
package keys

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Rules are a named key's rules at runtime.
type Rules struct {
	Name       string
	allowed    map[string]bool // nil: every model
	Models     []string        // allowed, in config order
	Limits     quota.Rules
	OverBudget string // the model served once a token or money budget is spent
	Team       string // Key.Team: the team whose budgets it shares
	reserveN   int64  // Key.Reserve
	Priority   int    // Key.Priority
	NoHedge    bool   // Key.NoHedge
	CheapAt    int    // Key.CheapAt: the share of its money budget past which pools try their cheapest first
	rules      bool   // Key.HasRules: models, rates, budgets, over_budget or reserve
	operator   bool   // config.Operators: marked operator, or rule-free when none is
	scope      string // a key without a name: its own (unnamedScope)
}

// Scope is the tenant the key's data belongs to (docs/door.md#a-tenants-data-is-its-own):
// its name, or for a key without one a digest of its token, so that the
// tokens of `keys {env.GATEWAY_KEYS}`, one per tenant, are as many tenants;
// "" for no key at all (a gateway without keys has one tenant).
func (kr *Rules) Scope() string {
	if kr == nil {
		return ""
	}
	if kr.scope != "" {
		return kr.scope
	}
	return kr.Name
}

// unnamedScope is the scope of a key without a name: the same for its
// token across reloads and restarts (saved slots are found by it), never a
// key name (a name cannot hold a NUL), and never the token: it is only
// hashed again (with a session key, or into the prefix blocks) before
// anything keeps it.
func unnamedScope(token string) string {
	sum := sha256.Sum256([]byte("llm_gateway tenant scope\x00" + token))
	return "\x00" + hex.EncodeToString(sum[:])
}

// Reserve is what a request that names no maximum answer reserves for it,
// as the key says (Key.Reserve); 0 when it says nothing, and the gateway
// reserves what the engines may generate (handler's answerBound).
func (kr *Rules) Reserve() int64 {
	if kr == nil {
		return 0
	}
	return max(kr.reserveN, 0)
}

// Allows reports whether the key may use model (a model, alias or pool).
func (kr *Rules) Allows(model string) bool {
	return kr == nil || kr.allowed == nil || kr.allowed[model]
}

// AllowsAll reports whether the key may use every model.
func (kr *Rules) AllowsAll() bool { return kr == nil || kr.allowed == nil }

// RuleFree reports whether the key has no rules (models, rates, budgets):
// no key at all, or one that may do anything a request can. A key with
// rules never reaches a route the operator opened beyond the APIs' own.
func (kr *Rules) RuleFree() bool { return kr == nil || !kr.rules }

// Operator reports whether the key is an operator's (config.Operators): no
// key at all (a gateway without keys), a key marked operator, or, when none
// is, a key without rules. A key with rules is never one.
func (kr *Rules) Operator() bool { return kr == nil || kr.operator }

// Ring checks callers' tokens. Tokens are compared as SHA-256 digests with
// subtle.ConstantTimeCompare against every key, so neither a token's length
// nor which key it matched shows in the timing.
type Ring struct {
	digests [][sha256.Size]byte
	Rules   []*Rules // per digest; every token of a name shares one
}

func NewRing(keys []config.Key) *Ring {
	if len(keys) == 0 {
		return nil
	}
	k := &Ring{}
	byName := map[string]*Rules{}
	isOperator := config.Operators(keys)
	for _, key := range keys {
		k.digests = append(k.digests, sha256.Sum256([]byte(key.Value)))
		kr := byName[key.Name]
		if kr == nil || key.Name == "" {
			kr = NewRules(key)
			kr.operator = isOperator(key)
			byName[key.Name] = kr
			if key.Name == "" {
				kr.scope = unnamedScope(key.Value)
			}
		}
		k.Rules = append(k.Rules, kr)
	}
	return k
}

// NewRules are a key's rules at runtime: a key block's, an issued key's or
// an identity's (its Value and Operator play no part: only the ring makes
// an operator, of its own keys).
func NewRules(key config.Key) *Rules {
	kr := &Rules{Name: key.Name, Limits: key.Rules(), OverBudget: key.OverBudgetFallback, Team: key.Team, reserveN: key.Reserve, Priority: key.Priority, NoHedge: key.NoHedge,
		CheapAt: key.CheapAt, rules: key.HasRules()}
	if len(key.Models) > 0 {
		kr.allowed, kr.Models = map[string]bool{}, key.Models
		for _, m := range key.Models {
			kr.allowed[m] = true
		}
	}
	return kr
}

// Names are the names of the ring's named keys, each once.
func (k *Ring) Names() []string {
	if k == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, kr := range k.Rules {
		if kr.Name != "" && !seen[kr.Name] {
			seen[kr.Name] = true
			out = append(out, kr.Name)
		}
	}
	return out
}

// Check returns the matching key's rules and whether the request carries a
// valid key. A nil keyring accepts everyone (with no rules).
func (k *Ring) Check(r *http.Request) (*Rules, bool) {
	if k == nil {
		return nil, true
	}
	return k.match(callerToken(r.Header))
}

// match returns the rules of the key token is, comparing its digest with
// every key's in constant time. A nil ring matches nothing.
func (k *Ring) match(token string) (*Rules, bool) {
	if k == nil || token == "" {
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
	return k.Rules[match], true
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

// Only is names less those the key may not use: a restricted key's errors
// list what it may ask for, not every model and engine of the gateway.
func (kr *Rules) Only(names []string) []string {
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

func LimitsOf(ls []quota.Limit) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	return strings.Join(s, ", ")
}

// NotAllowed is the refusal of a model the key may not use.
func (kr *Rules) NotAllowed(model string) *apierror.Error {
	if len(model) > 256 { // an error names what was asked, never echoes it whole
		model = model[:256] + "…"
	}
	return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "model_not_allowed", Message: fmt.Sprintf("key %s may not use the model %q; it may use: %s", kr.Name, model, strings.Join(kr.Models, ", "))}
}

// RateHeaders are OpenAI's rate-limit headers for a decision: the tightest
// request and token limits, what is left of them and when they reset; and,
// in their style, the tightest money budget's, in US dollars
// (x-ratelimit-remaining-spend: 0.3575).
func RateHeaders(d quota.Decision) http.Header {
	h := http.Header{}
	add := func(kind string, hr quota.Headroom, count func(int64) string) {
		if hr.Limit == 0 {
			return
		}
		h.Set("X-Ratelimit-Limit-"+kind, count(hr.Limit))
		h.Set("X-Ratelimit-Remaining-"+kind, count(max(0, hr.Remaining)))
		h.Set("X-Ratelimit-Reset-"+kind, resetString(hr.Reset))
	}
	whole := func(n int64) string { return strconv.FormatInt(n, 10) }
	add("Requests", d.Requests, whole)
	add("Tokens", d.Tokens, whole)
	add("Spend", d.Spend, func(n int64) string { return price.Amount(n).String() })
	return h
}

// resetString writes a reset time as OpenAI does: "1s", "6m0s", "2h3m".
func resetString(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	return d.Round(time.Second).String()
}
