package engines

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// New makes an engine of a valid config (the handler's Config.Validate
// checks every engine, once). It starts nothing: Provision (and so `caddy
// validate`) may call it freely. rt carries readiness probes; log receives
// the engine's output.
func New(cfg Config, rt http.RoundTripper, log *zap.Logger) (*Engine, error) {
	cfg = cfg.WithDefaults()
	e := &Engine{cfg: cfg, rt: rt, log: log, clock: clock.Real, changed: make(chan struct{})}
	e.lines.secrets = secretsOf(cfg)
	e.brk = NewBreaker(cfg.BreakerFailures, time.Duration(cfg.BreakerCooldown), e.now)
	e.life, e.cancel = context.WithCancel(context.Background())
	e.lim = newLimiter(cfg.concurrency(), cfg.Queue, time.Duration(cfg.QueueTimeout), e.clock, e.life.Done())
	if !cfg.Managed() {
		u, err := url.Parse(cfg.To)
		if err != nil {
			return nil, err
		}
		e.base, e.state = u, Ready
	}
	if cfg.Slots != nil {
		e.slots = newSlotTable(cfg)
	}
	if cfg.Managed() && cfg.Group != "" {
		e.boxes = append(e.boxes, joinBox("group:"+cfg.Group, true, e))
	}
	if cfg.Managed() && cfg.Memory > 0 {
		e.boxes = append(e.boxes, joinBox(memoryBoxOf(cfg.Devices), false, e))
	}
	return e, nil
}
