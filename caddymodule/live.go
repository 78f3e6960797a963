package caddymodule

import (
	"slices"
	"sync"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The live configs: the engines, gateways and histories of the configs
// provisioned now. Engines outlive configs, and a reload runs two configs
// for a while, so the admin API, the status pages and the metrics find what
// runs here, the newest config's first. This file references nothing else
// of the package.

// liveEngines are the engines of the configs currently provisioned, for the
// admin API, by name; the most recently provisioned config wins a name.
var (
	liveMu      sync.Mutex
	liveEngines = map[string][]*engines.Engine{}
)

func registerForAdmin(es []*engines.Engine) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for _, e := range es {
		liveEngines[e.Name()] = append(liveEngines[e.Name()], e)
	}
}

func unregisterForAdmin(es []*engines.Engine) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for _, e := range es {
		list := liveEngines[e.Name()]
		for i, x := range list {
			if x == e {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(liveEngines, e.Name())
		} else {
			liveEngines[e.Name()] = list
		}
	}
}

// lookupEngine returns the newest live engine of that name.
func lookupEngine(name string) *engines.Engine {
	liveMu.Lock()
	defer liveMu.Unlock()
	list := liveEngines[name]
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}

func allStatuses() []engines.Status {
	liveMu.Lock()
	names := make([]string, 0, len(liveEngines))
	for n := range liveEngines {
		names = append(names, n)
	}
	liveMu.Unlock()
	slices.Sort(names)
	out := make([]engines.Status, 0, len(names))
	for _, n := range names {
		if e := lookupEngine(n); e != nil {
			out = append(out, e.Status())
		}
	}
	return out
}

// liveGateways are the handlers of the configs currently provisioned, the
// oldest first; newestGateways walks them.
var liveGateways []*handler.Gateway

func registerGateway(g *handler.Gateway) {
	liveMu.Lock()
	defer liveMu.Unlock()
	liveGateways = append(liveGateways, g)
}

func unregisterGateway(g *handler.Gateway) {
	liveMu.Lock()
	defer liveMu.Unlock()
	for i, x := range liveGateways {
		if x == g {
			liveGateways = append(liveGateways[:i:i], liveGateways[i+1:]...)
			return
		}
	}
}

// newestGateways is the live gateways, the newest config's first. It is
// the one walk over them: the pools, the keys' usage and reset, the breaker
// metrics and the pool to probe all start here, so that a name two live
// configs share is always the newest's.
func newestGateways() []*handler.Gateway {
	liveMu.Lock()
	gws := slices.Clone(liveGateways)
	liveMu.Unlock()
	slices.Reverse(gws)
	return gws
}

// newestByName gathers what each live gateway lists (its pools, its keys'
// usage), each name once, as the newest config that has it lists it; none
// is [], not null, in the admin API's JSON.
func newestByName[T any](list func(*handler.Gateway) []T, name func(T) string) []T {
	out := []T{}
	seen := map[string]bool{}
	for _, g := range newestGateways() {
		for _, x := range list(g) {
			if !seen[name(x)] {
				seen[name(x)] = true
				out = append(out, x)
			}
		}
	}
	return out
}

// gatewayWithPool returns the newest live gateway that has the pool.
func gatewayWithPool(name string) *handler.Gateway {
	for _, g := range newestGateways() {
		if g.HasPool(name) {
			return g
		}
	}
	return nil
}

// livePools lists every live pool once, the newest config's first.
func livePools() []handler.PoolStatus {
	return newestByName((*handler.Gateway).Pools, func(p handler.PoolStatus) string { return p.Name })
}

// liveKeyUsage is the usage of every named key with limits in the live
// configs, each key once, as the newest config that has it counts it. The
// admin API and the status page show it.
func liveKeyUsage() []quota.KeyUsage {
	return newestByName((*handler.Gateway).KeyUsage, func(u quota.KeyUsage) string { return u.Key })
}

// liveHistories are the live configs' histories, the newest last: the
// admin API and the status pages read the newest.
var liveHistories struct {
	sync.Mutex
	list []*history.Store
}

func registerHistory(st *history.Store) {
	liveHistories.Lock()
	defer liveHistories.Unlock()
	liveHistories.list = append(liveHistories.list, st)
}

func unregisterHistory(st *history.Store) {
	liveHistories.Lock()
	defer liveHistories.Unlock()
	if i := slices.Index(liveHistories.list, st); i >= 0 {
		liveHistories.list = slices.Delete(liveHistories.list, i, i+1)
	}
}

// newestHistory is the newest live config's history, nil when every live
// config has it off.
func newestHistory() *history.Store {
	liveHistories.Lock()
	defer liveHistories.Unlock()
	if n := len(liveHistories.list); n > 0 {
		return liveHistories.list[n-1]
	}
	return nil
}
