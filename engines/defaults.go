package engines

import (
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// Every default of an engine's config, filled in once (parse → defaults →
// validate); the values are the Default constants in config.go.

// WithDefaults returns c with every unset field set to its default, and
// {engine.name} filled in: every engine's config passes here after it has
// inherited the handler's defaults, so a `defaults` cmd names each engine.
func (c Config) WithDefaults() Config {
	c = c.withName().withProvider()
	if c.Ready == "" {
		c.Ready = DefaultReady
	}
	if c.HealthInterval > 0 {
		if c.HealthPath == "" && c.Ready != ReadyNone && !c.IsProvider() {
			// a provider's engine is checked with its provider's own
			// check (answers.go), or the health_path it names
			c.HealthPath = c.Ready
		}
		if c.HealthTimeout == 0 {
			c.HealthTimeout = caddy.Duration(DefaultHealthTimeout)
		}
		if c.HealthPasses == 0 {
			c.HealthPasses = DefaultHealthPasses
		}
		if c.HealthFails == 0 {
			c.HealthFails = DefaultHealthFails
		}
	}
	if c.Queue > 0 && c.QueueTimeout == 0 {
		c.QueueTimeout = caddy.Duration(DefaultQueueTimeout)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = caddy.Duration(DefaultStartTimeout)
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = caddy.Duration(DefaultStopTimeout)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = caddy.Duration(DefaultDialTimeout)
	}
	if c.HeaderTimeout == 0 {
		c.HeaderTimeout = caddy.Duration(DefaultHeaderTimeout)
	}
	if c.HangupGrace == 0 {
		c.HangupGrace = c.DialTimeout
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = caddy.Duration(DefaultStreamIdle)
	}
	if c.FallbackAfter == 0 {
		c.FallbackAfter = caddy.Duration(DefaultFallbackAfter)
	}
	if c.Retries == nil {
		n := DefaultRetries
		c.Retries = &n
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = caddy.Duration(DefaultRetryAfterMax)
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFails
	}
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = caddy.Duration(DefaultBreakerCool)
	}
	c = c.withSwapDefaults()
	return c.withSignalDefaults()
}

// withName returns c with {engine.name} replaced by its name in the options
// that take {engine.port}, in copies of its slices (which it may share with
// the defaults it inherited).
func (c Config) withName() Config {
	if c.Name == "" {
		return c
	}
	return c.Rewrite(func(s string) string { return strings.ReplaceAll(s, NamePlaceholder, c.Name) })
}

// Inherit returns c with every option it leaves unset taken from d, the
// handler's `defaults` block. An engine's identity (name, models,
// model_name) is its own; a default fallback or context_fallback is not
// given to the engine it names (an engine is not its own fallback).
func (c Config) Inherit(d Config) Config {
	cv := reflect.ValueOf(&c).Elem()
	dv := reflect.ValueOf(d)
	for i := range cv.NumField() {
		switch cv.Type().Field(i).Name {
		case "Name", "Models", "ModelName":
			continue
		case "Fallback", "ContextFallback":
			if name, _, _ := strings.Cut(dv.Field(i).String(), "/"); name == c.Name {
				continue
			}
		}
		if f := cv.Field(i); f.IsZero() {
			f.Set(dv.Field(i))
		}
	}
	return c
}

// withSignalDefaults fills in the signal options' defaults.
func (c Config) withSignalDefaults() Config {
	if c.Signals == "" {
		c.Signals = SignalsOff
	}
	if c.Signals == SignalsOff {
		return c
	}
	if c.SignalsPath == "" {
		c.SignalsPath = DefaultSignalsPath
	}
	if c.SignalsInterval == 0 {
		c.SignalsInterval = caddy.Duration(DefaultSignalsInterval)
	}
	if c.SignalsStale == 0 {
		c.SignalsStale = caddy.Duration(DefaultSignalsStale)
	}
	if c.SignalsSlotsPath == "" {
		c.SignalsSlotsPath = DefaultSignalsSlotsPath
	}
	return c
}

func (c Config) withSwapDefaults() Config {
	if c.Swap == "" {
		c.Swap = SwapStop
	}
	if c.Sleeps() {
		p := SleepPaths{}
		if c.Sleep != nil {
			p = *c.Sleep
		}
		if p.SleepPath == "" {
			p.SleepPath = DefaultSleepPath
		}
		if p.WakePath == "" {
			p.WakePath = DefaultWakePath
		}
		if p.SleepingPath == "" {
			p.SleepingPath = DefaultSleepingPath
		}
		c.Sleep = &p
	}
	return c.withSlotDefaults()
}

func (c Config) withSlotDefaults() Config {
	if c.Slots == nil {
		return c
	}
	s := *c.Slots
	if s.Parallel == 0 {
		s.Parallel = 1
	}
	if s.MaxSessions == 0 {
		s.MaxSessions = DefaultSlotSessions
	}
	if s.SavePath == "" {
		s.SavePath = DefaultSlotSavePath
	}
	if s.RestorePath == "" {
		s.RestorePath = DefaultSlotRestorePath
	}
	if s.Timeout == 0 {
		s.Timeout = caddy.Duration(DefaultSlotTimeout)
	}
	c.Slots = &s
	return c
}
