package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Key is one bearer token the gateway accepts. Its rules (every field but
// Value and Operator) are also the rules of a key issued at run time (the
// keystore package keeps them, IssuedKeys) and of an identity's rule block
// (Identity): a rule added here is a rule of all three.
type Key struct {
	// Name labels the key in logs and metrics (never the key itself).
	// Default: "" (unnamed).
	Name string `json:"name,omitempty"`

	// Value is the token; placeholders such as {env.GATEWAY_KEYS} are
	// resolved at provision time, and a value that expands to several
	// tokens separated by commas or spaces accepts each of them.
	// An issued key's and an identity block's are empty.
	Value string `json:"value,omitempty"`

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

	// Spend are money budgets of this key, in US dollars per window, such
	// as "1/d" or "50/mo": what its requests cost at their models' prices
	// (Price). Default: none.
	Spend []quota.SpendLimit `json:"spend,omitempty"`

	// Team names the team (Config.Teams) whose budgets this key's
	// requests count against too. Default: none.
	Team string `json:"team,omitempty"`

	// Reserve is what a request of this key that names no max_tokens (nor
	// max_completion_tokens, max_output_tokens) reserves of its token
	// budget for its answer while it is in flight: the operator's estimate,
	// which an answer longer than it passes by the difference. Default:
	// none, and such a request reserves what its engines may generate
	// (their max_output_tokens, 8192 toward Messages), or, when nothing
	// bounds that, the budget: it then runs alone.
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

	// NoHedge keeps this key's requests from ever being hedged (a second
	// attempt started beside a slow first one): for a caller who pays per
	// upstream attempt. Default: false (the route's hedge_after holds).
	NoHedge bool `json:"no_hedge,omitempty"`

	// OverBudgetFallback is the model a request goes to once a token or
	// money budget is spent (its own or its team's), instead of a 429
	// insufficient_quota. Default: "" (refuse).
	OverBudgetFallback string `json:"over_budget_fallback,omitempty"`

	// CheapAt is a share of the key's money budget, in percent: once a
	// request would take its spend past it, pools try their cheapest
	// members first for the key (cheap.go). Default: 0, never.
	CheapAt int `json:"cheap_at,omitempty"`
}

// HasRules reports whether the key carries rules beyond its token: models,
// rates, budgets, an over_budget or a reserve. A key with rules is never an
// operator.
func (k Key) HasRules() bool {
	return len(k.Models) > 0 || k.limited() || k.OverBudgetFallback != "" || k.Reserve != 0 || k.CheapAt != 0
}

// limited reports whether the key has limits of its own or a team's.
func (k Key) limited() bool {
	return len(k.Rate) > 0 || len(k.Tokens) > 0 || len(k.Spend) > 0 || k.Team != ""
}

// rules are the key's limits, as the quota package counts them.
func (k Key) Rules() quota.Rules {
	return quota.Rules{Rate: k.Rate, Tokens: k.Tokens, Spend: quota.SpendLimits(k.Spend)}
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
// engine and read other teams' usage and engines' output.
func OperatorTokens(keys []Key) []string {
	isOperator := Operators(keys)
	var out []string
	for _, k := range SplitKeys(keys) {
		if isOperator(k) {
			out = append(out, k.Value)
		}
	}
	return out
}

// Operators is the rule that tells the operators among keys: the keys
// marked operator, or, when none is, every key without rules.
func Operators(keys []Key) func(Key) bool {
	marked := slices.ContainsFunc(keys, func(k Key) bool { return k.Operator })
	return func(k Key) bool { return !k.HasRules() && (k.Operator || !marked) }
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
		if k.Operator && k.HasRules() {
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

// HasLimits reports whether a key of the config may have rate or token
// limits: a key block or an identity's rule block has, or keys are issued
// at run time (each may).
func (c Config) HasLimits() bool {
	if c.IssuedKeys != nil || c.Identity.hasLimits() || len(c.Teams) > 0 {
		return true
	}
	for _, k := range c.Keys {
		if k.limited() {
			return true
		}
	}
	return false
}

// validateKeyRules checks the keys' rules against the config: a name, known
// models, an over_budget fallback that is served here and a token budget
// for it to apply to, one set of rules per name.
func (c Config) validateKeyRules(models map[string]string) error {
	byName := map[string]Key{}
	for _, k := range c.Keys {
		if !k.HasRules() {
			continue
		}
		if k.Name == "" {
			return fmt.Errorf("a key with models, rate, tokens, spend, team or over_budget needs a name (key <name> <token> { … })")
		}
		if prev, ok := byName[k.Name]; ok && fmt.Sprint(prev.Models, prev.Rate, prev.Tokens, prev.Spend, prev.Team, prev.OverBudgetFallback, prev.CheapAt) !=
			fmt.Sprint(k.Models, k.Rate, k.Tokens, k.Spend, k.Team, k.OverBudgetFallback, k.CheapAt) {
			return &ConfigError{Key: k.Name, Err: fmt.Errorf("key %s is given twice with different rules", k.Name)}
		}
		byName[k.Name] = k
		if err := CheckRules(k, "key "+k.Name, c.knows(models)); err != nil {
			return &ConfigError{Key: k.Name, Err: err}
		}
	}
	return nil
}

// knows reports whether a name is a model or pool of the config; models
// are the engines' models, as Validate gathers them.
func (c Config) knows(models map[string]string) func(string) bool {
	return func(m string) bool {
		if _, ok := models[m]; ok || m == DefaultPool && len(c.Pools) > 0 {
			return true
		}
		for _, p := range c.Pools {
			if p.Name == m {
				return true
			}
		}
		return false
	}
}

// CheckRules checks one key's rules, wherever they come from (a key block,
// a key issued at run time, an identity's rule block): its models and
// over_budget fallback are names known says are served, its limits are
// valid, and an over_budget fallback has a token budget to apply to. Its
// errors start with label ("key team-a").
func CheckRules(k Key, label string, known func(string) bool) error {
	for _, m := range k.Models {
		if !known(m) {
			return fmt.Errorf("%s: models: %q is no model or pool of this gateway", label, m)
		}
	}
	if err := k.Rules().Validate(); err != nil {
		return fmt.Errorf("%s: %v", label, err)
	}
	if err := checkCheapAt(label, k.CheapAt, len(k.Spend)); err != nil { // cheap.go
		return err
	}
	if f := k.OverBudgetFallback; f != "" {
		if !known(f) {
			return fmt.Errorf("%s: over_budget fallback %q is no model or pool of this gateway", label, f)
		}
		if len(k.Tokens) == 0 && len(k.Spend) == 0 && k.Team == "" {
			return fmt.Errorf("%s: over_budget fallback needs a token or money budget (tokens 200k/d, spend 1/d, or a team's) to apply to", label)
		}
	}
	return nil
}
