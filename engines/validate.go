package engines

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Validation of an engine's config, after its defaults: the errors the
// Caddyfile adapter turns into file:line.

// foreignPlaceholder matches what other tools write for a value filled in
// at start: llama-swap's ${PORT} and ${MODEL_ID}, a shell's ${NAME}.
var foreignPlaceholder = regexp.MustCompile(`\$\{[^}]*\}?`)

// CheckPlaceholders refuses, in an option that takes {engine.port} (named
// option, for the error), the placeholders that nothing here fills in and
// that would reach the engine as written: llama-swap's ${PORT} validates
// today and fails at the first request with "invalid port", and
// {port} is the request's port in a Caddyfile (the adapter turns it into
// {http.request.port}), never the engine's.
func CheckPlaceholders(option string, values ...string) error {
	for _, v := range values {
		if m := foreignPlaceholder.FindString(v); m != "" {
			switch m {
			case "${PORT}":
				return fmt.Errorf("%s: %s is llama-swap's placeholder and nothing fills it in here: write %s (a free port picked at each start)", option, m, PortPlaceholder)
			case "${MODEL_ID}":
				return fmt.Errorf("%s: %s is llama-swap's placeholder and nothing fills it in here: write %s (the engine's name)", option, m, NamePlaceholder)
			}
			return fmt.Errorf("%s: %s is not filled in here: write %s for the engine's port, %s for its name, {env.NAME} for an environment variable (in a shell script, $NAME without braces)",
				option, m, PortPlaceholder, NamePlaceholder)
		}
		for _, p := range []string{"{port}", "{http.request.port}"} {
			if strings.Contains(v, p) {
				return fmt.Errorf("%s: %s is the port of the request to Caddy, not the engine's: write %s (a free port picked at each start)", option, p, PortPlaceholder)
			}
		}
	}
	return nil
}

// Repeated is the first name that names lists twice, or "".
func Repeated(names []string) string {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return n
		}
		seen[n] = true
	}
	return ""
}

// checkFilterPath refuses a filter path the gateway itself reads: a body
// whose model or stream the engine sees differently from the gateway would
// route one way and answer another.
func checkFilterPath(p string) error {
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("bad path %q: names joined by dots, none empty", p)
		}
	}
	switch strings.ToLower(segs[0]) {
	case "model", "stream", "fallbacks":
		return fmt.Errorf("%q is the gateway's to read, not a filter's to change (model_name renames the model)", segs[0])
	}
	return nil
}

// ValidateFilters checks the set and strip filters.
func (c Config) ValidateFilters() error {
	where := "defaults"
	if c.Name != "" {
		where = "engine " + c.Name
	}
	for _, s := range c.Set {
		if err := checkFilterPath(s.Path); err != nil {
			return fmt.Errorf("%s: set: %v", where, err)
		}
		if !json.Valid(s.Value) {
			return fmt.Errorf("%s: set %s: the value %q is not JSON (a string is written in quotes: `\"low\"`)", where, s.Path, s.Value)
		}
	}
	for _, p := range c.Strip {
		if err := checkFilterPath(p); err != nil {
			return fmt.Errorf("%s: strip: %v", where, err)
		}
	}
	return nil
}

// Validate checks one engine's definition on its own; cross-engine rules
// (unique names and models) are the handler's.
func (c Config) Validate() error {
	c = c.withProvider()
	if err := c.validateProvider(); err != nil {
		return err
	}
	if c.Name == "" {
		return fmt.Errorf("an engine needs a name")
	}
	if strings.ContainsAny(c.Name, "/ \t") {
		return fmt.Errorf("engine %s: a name may not contain '/' or spaces", c.Name)
	}
	if c.To == "" {
		return fmt.Errorf("engine %s: missing 'to' (the engine's base URL)", c.Name)
	}
	if err := c.Hedge.Validate("engine " + c.Name); err != nil {
		return err
	}
	if c.Memory < 0 || c.MinLoaded < 0 {
		return fmt.Errorf("engine %s: memory and min_loaded may not be negative", c.Name)
	}
	if c.Evict != "" && c.Evict != EvictIdle && c.Evict != EvictNever {
		return fmt.Errorf("engine %s: evict takes idle or never, not %q", c.Name, c.Evict)
	}
	if (c.Memory > 0 || c.MinLoaded > 0 || c.Evict != "" || len(c.Devices) > 0) && !c.Managed() {
		return fmt.Errorf("engine %s: memory, min_loaded, evict and devices are for an engine the gateway starts (with cmd)", c.Name)
	}
	if len(c.Devices) > 0 {
		if _, err := ParseDevices(DeviceSet(c.Devices)); err != nil {
			return fmt.Errorf("engine %s: devices are device ids from 0, each once", c.Name)
		}
	}
	if c.Managed() && !canStartProcesses {
		return errNoLocalEngines(c.Name)
	}
	if err := c.validateSignals(); err != nil {
		return err
	}
	if err := c.validateSwap(); err != nil {
		return err
	}
	for _, o := range []struct {
		name   string
		values []string
	}{{"to", []string{c.To}}, {"cmd", c.Cmd}, {"stop_cmd", c.StopCmd}} {
		if err := CheckPlaceholders(o.name, o.values...); err != nil {
			return fmt.Errorf("engine %s: %v", c.Name, err)
		}
	}
	// a placeholder such as {env.CPU_ENGINE} is checked once resolved, at
	// provision; {engine.port} stands for a port here
	if to := strings.ReplaceAll(c.To, PortPlaceholder, "1"); !strings.Contains(to, "{") {
		u, err := url.Parse(to)
		if err != nil {
			return fmt.Errorf("engine %s: bad 'to' URL: %v", c.Name, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("engine %s: 'to' must be an http:// or https:// URL, not %q", c.Name, c.To)
		}
		if u.Host == "" {
			return fmt.Errorf("engine %s: 'to' has no host: %q", c.Name, c.To)
		}
	}
	if len(c.Models) == 0 {
		return fmt.Errorf("engine %s: missing 'models' (the names clients ask for)", c.Name)
	}
	if m := Repeated(c.Models); m != "" {
		return fmt.Errorf("engine %s: model %s is listed twice in its models", c.Name, m)
	}
	if err := c.ValidateFilters(); err != nil {
		return err
	}
	if c.ModelsFrom != "" && (c.Managed() || !strings.HasPrefix(c.ModelsFrom, "/")) {
		return fmt.Errorf("engine %s: models_from takes a path starting with '/' and is for remote engines (no cmd): the gateway knows its own engines' state", c.Name)
	}
	for _, a := range c.APIs {
		if _, ok := api.Named(a); !ok {
			return fmt.Errorf("engine %s: api takes %s, not %q", c.Name, api.Names, a)
		}
	}
	usesPort := strings.Contains(c.To, PortPlaceholder) || strings.Contains(strings.Join(c.Cmd, " "), PortPlaceholder)
	if usesPort && !c.Managed() {
		return fmt.Errorf("engine %s: %s needs 'cmd': only an engine the gateway starts gets a picked port", c.Name, PortPlaceholder)
	}
	if !strings.HasPrefix(c.Ready, "/") && c.Ready != "" && c.Ready != ReadyNone {
		return fmt.Errorf("engine %s: 'ready' must be a path starting with '/', or none", c.Name)
	}
	if err := c.validateHealth(); err != nil {
		return err
	}
	if c.Retries != nil && *c.Retries < 0 {
		return fmt.Errorf("engine %s: retries may not be negative", c.Name)
	}
	if c.BreakerFailures < 0 {
		return fmt.Errorf("engine %s: breaker failures may not be negative", c.Name)
	}
	if err := c.validateLifeOptions(); err != nil {
		return err
	}
	if err := c.validateTransport(); err != nil {
		return err
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("engine %s: env %q is not KEY=VALUE", c.Name, kv)
		}
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{
		{"start_timeout", c.StartTimeout}, {"idle_timeout", c.IdleTimeout}, {"stop_timeout", c.StopTimeout},
		{"dial_timeout", c.DialTimeout}, {"header_timeout", c.HeaderTimeout}, {"hangup_grace", c.HangupGrace}, {"request_timeout", c.RequestTimeout},
		{"first_token_timeout", c.FirstTokenTimeout}, {"stream_idle_timeout", c.StreamIdleTimeout},
		{"fallback_after", c.FallbackAfter}, {"retry_after_max", c.RetryAfterMax}, {"breaker cool-down", c.BreakerCooldown},
		{"queue timeout", c.QueueTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("engine %s: %s may not be negative", c.Name, d.name)
		}
	}
	return nil
}

// validateLifeOptions checks stop_cmd, preload and the concurrency limit.
func (c Config) validateLifeOptions() error {
	if len(c.StopCmd) > 0 && !c.Managed() {
		return fmt.Errorf("engine %s: stop_cmd needs 'cmd': only an engine the gateway starts is stopped by it", c.Name)
	}
	if c.Preload && !c.Managed() {
		return fmt.Errorf("engine %s: preload needs 'cmd': a remote engine is not started by the gateway", c.Name)
	}
	if c.MaxConcurrent < 0 || c.Queue < 0 || c.MaxOutputTokens < 0 {
		return fmt.Errorf("engine %s: max_concurrent, queue and max_output_tokens may not be negative", c.Name)
	}
	if (c.Queue > 0 || c.QueueTimeout > 0) && c.MaxConcurrent == 0 {
		return fmt.Errorf("engine %s: queue needs max_concurrent: without a limit no request ever waits", c.Name)
	}
	return nil
}

func (c Config) validateHealth() error {
	set := c.HealthInterval != 0 || c.HealthPath != "" || c.HealthTimeout != 0 || c.HealthPasses != 0 || c.HealthFails != 0
	if !set {
		return nil
	}
	if c.Managed() {
		// the gateway runs it: its readiness probe and crash detection
		// already know whether it is up
		return fmt.Errorf("engine %s: health checks are for remote engines; one with 'cmd' is watched through its process and 'ready' path", c.Name)
	}
	if c.HealthInterval <= 0 {
		return fmt.Errorf("engine %s: health checks need health_interval", c.Name)
	}
	if c.HealthPath == "" && c.Ready == ReadyNone {
		return fmt.Errorf("engine %s: health checks of an engine with 'ready none' need a health_path", c.Name)
	}
	if c.HealthPath != "" && !strings.HasPrefix(c.HealthPath, "/") {
		return fmt.Errorf("engine %s: 'health_path' must be a path starting with '/'", c.Name)
	}
	if c.HealthTimeout < 0 || c.HealthPasses < 0 || c.HealthFails < 0 {
		return fmt.Errorf("engine %s: health_timeout, health_passes and health_fails may not be negative", c.Name)
	}
	return nil
}

// validateTransport checks that a transport is one the gateway provisions:
// Caddy's "http" transport module (the only one that carries requests to a
// URL the gateway names).
func (c Config) validateTransport() error {
	if len(c.Transport) == 0 {
		return nil
	}
	var t struct {
		Protocol string `json:"protocol"`
	}
	if err := json.Unmarshal(c.Transport, &t); err != nil {
		return fmt.Errorf("engine %s: bad transport: %v", c.Name, err)
	}
	if t.Protocol != "http" {
		return fmt.Errorf("engine %s: transport %q is not supported: use transport http { … }", c.Name, t.Protocol)
	}
	return nil
}

// errNoLocalEngines refuses a `cmd` engine on a platform where the gateway
// cannot stop a process tree (Windows), naming the way out.
func errNoLocalEngines(name string) error {
	return fmt.Errorf("engine %s: 'cmd' (an engine the gateway starts) is not supported on %s: "+
		"run the gateway in WSL2 (Linux, where cmd works), or start the model server yourself and give its address with 'to' "+
		"(remote engines work on every platform)", name, runtime.GOOS)
}

// ValidateDefaults checks a `defaults` block: any engine option but the ones
// that make an engine what it is.
func (c Config) ValidateDefaults() error {
	switch {
	case c.Name != "":
		return fmt.Errorf("defaults may not set a name")
	case len(c.Models) > 0 || c.ModelName != "":
		return fmt.Errorf("defaults may not set models or model_name: each engine serves its own")
	}
	return nil
}

func (c Config) validateSignals() error {
	switch c.Signals {
	case "", SignalsOff, SignalsMetrics:
	default:
		return fmt.Errorf("engine %s: signals takes metrics or off, not %q", c.Name, c.Signals)
	}
	if c.SignalsInterval < 0 || c.SignalsStale < 0 {
		return fmt.Errorf("engine %s: signals_interval and signals_stale may not be negative", c.Name)
	}
	if c.SignalsPath != "" && !strings.HasPrefix(c.SignalsPath, "/") {
		return fmt.Errorf("engine %s: signals_path takes a path starting with '/', not %q", c.Name, c.SignalsPath)
	}
	if p := c.SignalsSlotsPath; p != "" && p != SignalsOff && !strings.HasPrefix(p, "/") {
		return fmt.Errorf("engine %s: signals_slots_path takes a path starting with '/' or off, not %q", c.Name, p)
	}
	return nil
}

func (c Config) validateSwap() error {
	switch c.Swap {
	case "", SwapStop, SwapSleep:
	default:
		return fmt.Errorf("engine %s: swap takes stop or sleep, not %q", c.Name, c.Swap)
	}
	if !c.Sleeps() && (c.Sleep != nil || c.SleepAfter != 0) {
		return fmt.Errorf("engine %s: sleep paths and sleep_after are for swap sleep", c.Name)
	}
	if (c.Sleeps() || c.Slots != nil) && !c.Managed() {
		return fmt.Errorf("engine %s: swap sleep and slots are for an engine the gateway starts (with cmd)", c.Name)
	}
	if c.SleepAfter < 0 {
		return fmt.Errorf("engine %s: sleep_after may not be negative", c.Name)
	}
	if c.SleepAfter > 0 && c.IdleTimeout > 0 && c.IdleTimeout <= c.SleepAfter {
		return fmt.Errorf("engine %s: idle_timeout (%s) must be longer than sleep_after (%s): the engine sleeps first, then stops",
			c.Name, time.Duration(c.IdleTimeout), time.Duration(c.SleepAfter))
	}
	if p := c.Sleep; p != nil {
		for _, o := range []struct{ name, v string }{{"sleep_path", p.SleepPath}, {"wake_path", p.WakePath}, {"sleeping_path", p.SleepingPath}} {
			if o.v != "" && !strings.HasPrefix(o.v, "/") && !(o.name == "sleeping_path" && o.v == ReadyNone) {
				return fmt.Errorf("engine %s: %s takes a path starting with '/', not %q", c.Name, o.name, o.v)
			}
		}
	}
	return c.validateSlots()
}

func (c Config) validateSlots() error {
	s := c.Slots
	if s == nil {
		return nil
	}
	if s.Dir == "" {
		return fmt.Errorf("engine %s: slots save needs the engine's slot directory (its --slot-save-path)", c.Name)
	}
	if s.Parallel < 0 || s.MaxSessions < 0 || s.Timeout < 0 {
		return fmt.Errorf("engine %s: slots parallel, max_sessions and timeout may not be negative", c.Name)
	}
	for _, o := range []struct{ name, v string }{{"save_path", s.SavePath}, {"restore_path", s.RestorePath}} {
		if o.v != "" && (!strings.HasPrefix(o.v, "/") || !strings.Contains(o.v, "{id}")) {
			return fmt.Errorf("engine %s: slots %s takes a path starting with '/' with {id} for the slot, not %q", c.Name, o.name, o.v)
		}
	}
	return nil
}
