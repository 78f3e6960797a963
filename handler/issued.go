package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
)

// Keys issued at run time: the caddy module opens their store (the
// keystore package) for a config with issued_keys and hands it to the
// gateway, whose door then finds a caller's token among them as among the
// config's own keys (keys.Who). The admin API checks an issued key's rules
// against what the live gateways serve (Knows) and keeps its name apart
// from the config's keys (KeyNames).

// expectIssued closes the door of a config that takes issued keys from the
// start: until SetIssued hands it the store, it accepts no issued key, and
// it is never open to everyone for want of keys of its own.
func (g *Gateway) expectIssued(cfg config.Config) {
	if cfg.IssuedKeys != nil {
		g.who.Issued = noneIssued{}
	}
}

// noneIssued is the issued keys of a store not handed over yet: none.
type noneIssued struct{}

func (noneIssued) Find(string) (*keys.Rules, error) { return nil, nil }
func (noneIssued) All() []*keys.Rules               { return nil }

// SetIssued gives the door the keys issued at run time. Call before
// serving.
func (g *Gateway) SetIssued(src keys.Issued) { g.who.Issued = src }

// Knows reports whether name is a model, alias or pool this gateway
// serves: what an issued key's models and over_budget fallback may name.
func (g *Gateway) Knows(name string) bool {
	_, model := g.byModel[name]
	_, pool := g.pools[name]
	return model || pool
}

// KeyNames are the names of the config's own keys: no issued key may take
// one.
func (g *Gateway) KeyNames() []string { return g.who.Ring.Names() }
