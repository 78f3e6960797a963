package config

import (
	"fmt"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// A pool whose members come from a source at run time (Caddy's dynamic
// upstreams: DNS SRV or A records, or several of them): each address the
// source gives becomes a member made from the pool's template, a remote
// engine whose transport, key, health checks, models_from and timeouts
// every member shares, and whose `to` gives the scheme and path (its host
// and port are replaced by the address). The template itself serves
// nothing: it is no route of its own, lists no model and is checked by
// nobody.

// MaxDynamicMembers bounds the members one source may give a pool: a DNS
// answer is not the config, and a wrong record set must not make the
// gateway build thousands of engines. Of a larger answer, the current
// members are kept first, then the others by rendezvous score, the same on
// every front door; the rest are left out, with one warning in the log per
// answer (handler/dynamic.go).
const MaxDynamicMembers = 64

// IsDynamic reports whether the pool takes its members from a source.
func (p PoolConfig) IsDynamic() bool { return len(p.Dynamic) > 0 }

// dynamicMembers is how many members the pool may have at most from its
// source: the bound of its failover attempts when none is set.
func (p PoolConfig) dynamicMembers() int {
	if p.IsDynamic() {
		return MaxDynamicMembers
	}
	return 0
}

// Templates lists the engines that are templates of dynamic pools: they
// get no runtime and serve no request of their own.
func (c Config) Templates() map[string]bool {
	t := map[string]bool{}
	for _, p := range c.Pools {
		if p.IsDynamic() && p.Template != "" {
			t[p.Template] = true
		}
	}
	return t
}

// validateDynamic checks a pool's source and template: a source comes with
// a template, a template is a remote engine of this handler that nothing
// else names (it is no route, so a member, fallback or context fallback
// naming it would name nothing), and a pool takes members from one place.
func (c Config) validateDynamic(p PoolConfig, byName map[string]engines.Config) error {
	if !p.IsDynamic() {
		if p.Template != "" {
			return fmt.Errorf("pool %s: template %s needs a source of members: dynamic srv|a|multi …", p.Name, p.Template)
		}
		return nil
	}
	if len(p.Members) > 0 {
		return fmt.Errorf("pool %s takes its members from dynamic or from member lines, not both", p.Name)
	}
	if p.Template == "" {
		return fmt.Errorf("pool %s: dynamic needs a template: template <engine>, the remote engine each member is made from", p.Name)
	}
	t, ok := byName[p.Template]
	if !ok {
		return fmt.Errorf("pool %s: template %s is not an engine of this handler", p.Name, p.Template)
	}
	if t.Managed() || t.IsProvider() || t.To == "" {
		return fmt.Errorf("pool %s: template %s must be a remote engine with to (no cmd, no provider): its members are found, not started", p.Name, p.Template)
	}
	for _, q := range c.Pools {
		for _, m := range q.Members {
			if name, _, _ := strings.Cut(m, "/"); name == p.Template {
				return fmt.Errorf("pool %s: member %s is the template of pool %s, which serves nothing itself", q.Name, m, p.Name)
			}
		}
	}
	for _, e := range c.Engines {
		fb, _, _ := strings.Cut(e.ContextFallback, "/")
		if e.Fallback == p.Template || fb == p.Template {
			return fmt.Errorf("engine %s: its fallback %s is the template of pool %s, which serves nothing itself", e.Name, p.Template, p.Name)
		}
	}
	return nil
}
