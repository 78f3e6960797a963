package caddymodule

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The counters of the keys' rate and token limits: an embedded store under
// Caddy's data directory (they survive reloads and restarts), or Redis,
// shared by every gateway instance that names it. A store that fails is
// logged and counted in llm_gateway_quota_store_degraded; requests go on
// being served on local counters meanwhile.

// quotaPath is the embedded store's file.
func quotaPath() string {
	return filepath.Join(caddy.AppDataDir(), "llm_gateway", "quota.db")
}

// openLimiter opens the counters for a config whose keys have limits.
func openLimiter(cfg hconfig.Config, repl *caddy.Replacer, log *zap.Logger) (*quota.Limiter, error) {
	redisLogger.Do(func() { redis.SetLogger(redisLog{log}) })
	qc := quota.Config{
		Path: quotaPath(),
		OnDegraded: func(err error) {
			store := "embedded"
			if cfg.Store != nil {
				store = "redis"
			}
			if err != nil {
				log.Warn("the key limits' counter store is failing: counting on local counters until it is back",
					zap.String("store", store), zap.Error(err))
				metrics.quotaDegraded.WithLabelValues(store).Set(1)
				return
			}
			log.Info("the key limits' counter store is back", zap.String("store", store))
			metrics.quotaDegraded.WithLabelValues(store).Set(0)
		},
	}
	if st := cfg.Store; st != nil {
		qc.Redis = &quota.RedisConfig{
			Addr:     repl.ReplaceKnown(st.Redis, ""),
			Password: repl.ReplaceKnown(st.Password, ""),
			DB:       st.DB,
			Prefix:   st.Prefix,
			Timeout:  time.Duration(st.Timeout),
		}
	}
	lim, err := quota.Open(qc)
	if err != nil {
		return nil, fmt.Errorf("opening the counters of the keys' limits: %v", err)
	}
	return lim, nil
}

var redisLogger sync.Once

// redisLog sends go-redis's own lines (a failed dial while Redis is down) to
// Caddy's log at debug level: the gateway says what matters itself.
type redisLog struct{ log *zap.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug("redis: " + fmt.Sprintf(format, v...))
}
