package caddymodule

import (
	"encoding/json"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// enginePool keeps engine runtimes (and their processes) across config
// reloads. The key is the engine's whole resolved definition: a reload that
// keeps an engine as it was finds it here running; a changed definition is a
// new key, and the old engine is destructed (drained and stopped) when the
// old config lets go of it.
var enginePool = caddy.NewUsagePool()

// pooledEngine owns an engine and its transport.
type pooledEngine struct {
	*engines.Engine
	transport *reverseproxy.HTTPTransport
}

// Destruct stops the engine and closes its idle connections.
func (p pooledEngine) Destruct() error {
	err := p.Engine.Destruct()
	_ = p.transport.Cleanup()
	return err
}

// loadEngine finds or makes the runtime of ec, which has its defaults.
func loadEngine(ctx caddy.Context, ec engines.Config) (*engines.Engine, string, error) {
	b, err := json.Marshal(ec)
	if err != nil {
		return nil, "", err
	}
	key := string(b)
	val, _, err := enginePool.LoadOrNew(key, func() (caddy.Destructor, error) {
		// every upstream request goes through Caddy's reverse-proxy
		// transport: its dialer, keep-alives, TLS and HTTP/2 to cloud APIs
		t := &reverseproxy.HTTPTransport{
			DialTimeout: ec.DialTimeout,
			// the gateway owns the header budget (it needs to tell a
			// timeout from other failures), so the transport's is off
			ResponseHeaderTimeout: 0,
		}
		if err := t.Provision(ctx); err != nil {
			return nil, err
		}
		// the engine outlives this config: its logs go to a logger of
		// its own, not one tied to the config being loaded
		e, err := engines.New(ec, t, caddy.Log().Named("llm_gateway.engine."+ec.Name))
		if err != nil {
			return nil, err
		}
		e.SetObserver(engineObserver{})
		return pooledEngine{Engine: e, transport: t}, nil
	})
	if err != nil {
		return nil, "", err
	}
	return val.(pooledEngine).Engine, key, nil
}

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

// liveGateways are the handlers of the configs currently provisioned, for
// the admin API's pools.
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

// gatewayWithPool returns the newest live gateway that has the pool.
func gatewayWithPool(name string) *handler.Gateway {
	liveMu.Lock()
	defer liveMu.Unlock()
	for i := len(liveGateways) - 1; i >= 0; i-- {
		if liveGateways[i].HasPool(name) {
			return liveGateways[i]
		}
	}
	return nil
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
