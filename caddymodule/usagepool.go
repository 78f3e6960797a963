package caddymodule

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// enginePool keeps engine runtimes (and their processes) across config
// reloads. The key is the engine's whole resolved definition: a reload that
// keeps an engine as it was finds it here running; a changed definition is a
// new key, and the old engine is destructed (drained and stopped) when the
// old config lets go of it.
var enginePool = caddy.NewUsagePool()

// pooledEngine owns an engine, its transport and its logger.
type pooledEngine struct {
	*engines.Engine
	transport *reverseproxy.HTTPTransport
	log       engineLog
}

// draining counts the engines a reload let go of that still drain their
// requests in flight; tests wait for it.
var draining sync.WaitGroup

// Destruct stops the engine and closes its idle connections. An engine with
// requests in flight drains them in the background (bounded by its
// stop_timeout), so a reload that removes it returns at once instead of
// waiting for its streams; an idle one is stopped before Destruct returns.
func (p pooledEngine) Destruct() error {
	if p.Engine.Status().Leases == 0 {
		return p.destruct()
	}
	draining.Add(1)
	go func() {
		defer draining.Done()
		_ = p.destruct()
	}()
	return nil
}

func (p pooledEngine) destruct() error {
	err := p.Engine.Destruct()
	_ = p.transport.Cleanup()
	return err
}

// loadEngine finds or makes the runtime of ec, which has its defaults.
func loadEngine(ctx caddy.Context, ec engines.Config) (*engines.Engine, string, error) {
	// preload says when to start the engine, not what runs: turning it on
	// or off in a reload keeps the running process
	keyed := ec
	keyed.Preload = false
	keyed.About = nil // words for people: changing them keeps the process too
	b, err := json.Marshal(keyed)
	if err != nil {
		return nil, "", err
	}
	key := string(b)
	val, _, err := enginePool.LoadOrNew(key, func() (caddy.Destructor, error) {
		t, err := newTransport(ctx, ec)
		if err != nil {
			return nil, err
		}
		// the engine outlives this config: its logger writes where the
		// newest config that uses it says (see engineLog)
		log := newEngineLog(ec.Name)
		e, err := engines.New(ec, t, log.Logger)
		if err != nil {
			_ = t.Cleanup()
			return nil, err
		}
		e.SetObserver(engineObserver{})
		// health checks of a remote engine run while it lives (across
		// reloads that keep it), and end in its Destruct
		e.StartHealthChecks()
		e.StartSignals() // signals metrics: the engine's own load, read in the background
		return pooledEngine{Engine: e, transport: t, log: log}, nil
	})
	if err != nil {
		return nil, "", err
	}
	pe := val.(pooledEngine)
	pe.log.core.set(ctx.Logger().Core())
	return pe.Engine, key, nil
}

// defaultWriteBuffer is the engine transports' write buffer unless the
// transport block sets write_buffer_size.
const defaultWriteBuffer = 1 << 10

// newTransport provisions the engine's transport: every upstream request
// goes through Caddy's reverse-proxy HTTP transport (its dialer,
// keep-alives, TLS and HTTP/2), configured by the engine's transport block
// when it has one. The transport is not loaded into ctx as a module: it
// belongs to the engine, which outlives the config, and is cleaned up when
// the engine is destructed, not when this config is.
func newTransport(ctx caddy.Context, ec engines.Config) (*reverseproxy.HTTPTransport, error) {
	t := new(reverseproxy.HTTPTransport)
	if len(ec.Transport) > 0 {
		if err := json.Unmarshal(ec.Transport, t); err != nil {
			return nil, fmt.Errorf("reading transport: %v", err)
		}
	}
	if t.DialTimeout == 0 {
		t.DialTimeout = ec.DialTimeout
	}
	if t.WriteBufferSize == 0 {
		// a connection's write buffer holds a request's headers; a body
		// larger than what is left of it is written past it, so 1 KiB
		// costs no system call a 4 KiB one (Go's default) would save,
		// and keeps 3 KiB per open stream
		t.WriteBufferSize = defaultWriteBuffer
	}
	// the gateway owns the header budget (it needs to tell a timeout from
	// other failures), so the transport's is off unless the block sets it
	if err := t.Provision(ctx); err != nil {
		return nil, fmt.Errorf("provisioning transport: %v", err)
	}
	return t, nil
}
