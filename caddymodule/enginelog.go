package caddymodule

import (
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// engineLog is the logger of an engine's life and output. An engine outlives
// the config that started it, so its logger cannot be one config's; and a
// log's include/exclude (`log { include http.handlers.llm_gateway }`) only
// sees loggers that come from the module's own logger. So the
// engine logs through a core that each config that uses the engine points
// at its own module logger's core, under the name
// http.handlers.llm_gateway.engine.<name>.
type engineLog struct {
	core *swapCore
	*zap.Logger
}

func newEngineLog(engine string) engineLog {
	c := &swapCore{}
	c.set(zapcore.NewNopCore())
	return engineLog{core: c, Logger: zap.New(c).Named(engineLoggerName(engine))}
}

// engineLoggerName is the logger of an engine:
// http.handlers.llm_gateway.engine.<name>.
func engineLoggerName(engine string) string {
	return string((*Gateway)(nil).CaddyModule().ID) + ".engine." + engine
}

// swapCore is a zapcore.Core whose destination can be replaced while loggers
// built on it are in use.
type swapCore struct {
	inner atomic.Pointer[zapcore.Core]
}

func (c *swapCore) set(core zapcore.Core) { c.inner.Store(&core) }

func (c *swapCore) current() zapcore.Core { return *c.inner.Load() }

func (c *swapCore) Enabled(l zapcore.Level) bool { return c.current().Enabled(l) }

// With keeps the fields and follows the swaps: the fields are applied to
// whatever core is current when an entry is checked.
func (c *swapCore) With(fields []zapcore.Field) zapcore.Core {
	return &fieldsCore{swap: c, fields: fields}
}

func (c *swapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return c.current().Check(e, ce)
}

func (c *swapCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return c.current().Write(e, fields)
}

func (c *swapCore) Sync() error { return c.current().Sync() }

// fieldsCore is a swapCore with fields.
type fieldsCore struct {
	swap   *swapCore
	fields []zapcore.Field
}

func (f *fieldsCore) core() zapcore.Core { return f.swap.current().With(f.fields) }

func (f *fieldsCore) Enabled(l zapcore.Level) bool { return f.swap.Enabled(l) }

func (f *fieldsCore) With(fields []zapcore.Field) zapcore.Core {
	return &fieldsCore{swap: f.swap, fields: append(f.fields[:len(f.fields):len(f.fields)], fields...)}
}

func (f *fieldsCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return f.core().Check(e, ce)
}

func (f *fieldsCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	return f.core().Write(e, fields)
}

func (f *fieldsCore) Sync() error { return f.swap.Sync() }

// Interface guards
var (
	_ zapcore.Core = (*swapCore)(nil)
	_ zapcore.Core = (*fieldsCore)(nil)
)
