package config

import (
	"fmt"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Team is a group of keys sharing budgets: `team <name> { … }` beside the
// keys, and `team <name>` in each key block (or an issued key's or an
// identity's rules) that belongs to it. A request of a member key must fit
// its key's limits and its team's; both count it.
type Team struct {
	// Name is what its keys' `team` lines name. Required.
	Name string `json:"name"`

	// Rate, Tokens and Spend are the team's limits, as a key's: requests,
	// tokens and US dollars per window, every member's requests counted in
	// one set of counters. At least one.
	Rate   []quota.Limit      `json:"rate,omitempty"`
	Tokens []quota.Limit      `json:"tokens,omitempty"`
	Spend  []quota.SpendLimit `json:"spend,omitempty"`

	// OverBudgetFallback is the model a member's request goes to once a
	// team budget is spent; a member key's own over_budget wins. Default:
	// "" (refuse, unless the key says otherwise).
	OverBudgetFallback string `json:"over_budget_fallback,omitempty"`
}

// TeamPrefix starts a team's name in the counters, the metrics and the
// admin API: team:eng. No key is named so.
const TeamPrefix = "team:"

// Rules are the team's limits, as the quota package counts them.
func (t Team) Rules() quota.Rules {
	return quota.Rules{Rate: t.Rate, Tokens: t.Tokens, Spend: quota.SpendLimits(t.Spend)}
}

// validateTeams checks the teams and the keys' team lines: a team is named
// once and limits something, its over_budget model is served here, a key
// names a team that exists, and no key takes a team's counters' name.
func (c Config) validateTeams(models map[string]string) error {
	teams := map[string]bool{}
	for _, t := range c.Teams {
		err := func(format string, args ...any) error {
			return &ConfigError{Team: t.Name, Err: fmt.Errorf(format, args...)}
		}
		switch {
		case t.Name == "" || strings.ContainsAny(t.Name, "/:{} \t"):
			return err("team %q: a team's name is a word (letters, digits, - and _)", t.Name)
		case teams[t.Name]:
			return err("team %s is defined twice", t.Name)
		case t.Rules().Empty():
			return err("team %s limits nothing: give it rate, tokens or spend", t.Name)
		}
		if e := t.Rules().Validate(); e != nil {
			return err("team %s: %v", t.Name, e)
		}
		if f := t.OverBudgetFallback; f != "" && !c.knows(models)(f) {
			return err("team %s: over_budget fallback %q is no model or pool of this gateway", t.Name, f)
		}
		teams[t.Name] = true
	}
	for _, k := range c.Keys {
		if strings.HasPrefix(k.Name, TeamPrefix) {
			return &ConfigError{Key: k.Name, Err: fmt.Errorf("key %s: a name starting with %s is a team's counters'; give the key another", k.Name, TeamPrefix)}
		}
		if k.Team != "" && !teams[k.Team] {
			return &ConfigError{Key: k.Name, Err: fmt.Errorf("key %s: team %s is no team of this gateway (team %s { spend 100/mo })", k.Name, k.Team, k.Team)}
		}
	}
	return c.Identity.checkTeams(teams)
}

// checkTeams refuses an identity's rule block that names a team that does
// not exist.
func (id *Identity) checkTeams(teams map[string]bool) error {
	for _, b := range id.blocks() {
		if b.Team != "" && !teams[b.Team] {
			return &ConfigError{Identity: true, Err: fmt.Errorf("identity: team %s is no team of this gateway", b.Team)}
		}
	}
	return nil
}
