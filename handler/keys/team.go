package keys

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Team is a team's limits at runtime (config.Team): the budgets and rates
// its keys share, counted under Counted.
type Team struct {
	Name       string // as the config names it
	Counted    string // its name in the counters: config.TeamPrefix + Name
	Limits     quota.Rules
	OverBudget string // the model its keys' requests go to once a team budget is spent
}

// NewTeams are a config's teams at runtime, by name.
func NewTeams(teams []config.Team) map[string]*Team {
	out := map[string]*Team{}
	for _, t := range teams {
		out[t.Name] = &Team{Name: t.Name, Counted: config.TeamPrefix + t.Name, Limits: t.Rules(), OverBudget: t.OverBudgetFallback}
	}
	return out
}
