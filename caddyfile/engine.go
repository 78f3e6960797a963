package caddyfile

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// An engine block, and the defaults block that takes the same options.

// parseEngine parses `engine <name> { … }`, and returns where each
// single-value option was set, and the lines of a provider's engine it has
// beside no `provider` line of its own (provider.go), for the provider it
// inherits.
func parseEngine(d *cf.Dispenser) (engines.Config, settings, []cf.Segment, error) {
	var ec engines.Config
	var err error
	if ec.Name, err = blockArg(d, "engine needs a name: engine <name> { … }"); err != nil {
		return ec, nil, nil, err
	}
	set, lines, err := parseEngineOptions(d, &ec, "engine "+ec.Name)
	return ec, set, lines, err
}

// parseDefaults parses `defaults { … }`: engine options for every engine
// that does not set them.
func parseDefaults(d *cf.Dispenser) (engines.Config, settings, error) {
	var ec engines.Config
	if d.NextArg() {
		return ec, nil, d.ArgErr()
	}
	set, lines, err := parseEngineOptions(d, &ec, "defaults")
	if err == nil && len(lines) > 0 {
		err = noProvider(lines, "defaults")
	}
	return ec, set, err
}

// parseEngineOptions parses the block of an engine (or of defaults, where
// what names the engine is refused), named where for errors, and returns
// where each single-value option was set, and the lines of a provider's
// engine it has when it has no provider line.
func parseEngineOptions(d *cf.Dispenser, ec *engines.Config, where string) (settings, []cf.Segment, error) {
	nesting := d.Nesting()
	set := settings{}
	var lines []cf.Segment // for the provider (provider.go)
	for d.NextBlock(nesting) {
		if where == "defaults" {
			switch d.Val() {
			case "models", "model_name":
				return set, nil, d.Errf("%s may not be in defaults: each engine serves its own models", d.Val())
			}
		}
		if sub := d.Val(); sub != "env" && sub != "set" && sub != "strip" && sub != "metadata" {
			if err := set.once(d); err != nil {
				return set, nil, err
			}
		}
		var err error
		switch sub := d.Val(); sub {
		case "to":
			err = oneArg(d, &ec.To)
			if err == nil {
				err = checkValues(d, "to", ec.To)
			}
		case "models":
			ec.Models = d.RemainingArgs()
			if len(ec.Models) == 0 {
				err = d.ArgErr()
			} else if m := engines.Repeated(ec.Models); m != "" {
				err = d.Errf("models: %s is listed twice", m)
			}
		case "model_name":
			err = oneArg(d, &ec.ModelName)
		case "provider":
			ec.Provider, err = parseProvider(d)
		case "allow_media":
			if ec.AllowMedia = d.RemainingArgs(); len(ec.AllowMedia) == 0 {
				err = d.Errf("allow_media takes the media references a provider may be sent beside https: and data: URLs: URL schemes and file_id (allow_media gs file_id)")
			}
		case "passthrough":
			if ec.Passthrough = d.RemainingArgs(); len(ec.Passthrough) == 0 {
				err = d.Errf("passthrough takes the provider's routes that /upstream/ passes (countTokens, converse, …) or paths: passthrough countTokens /v1beta/files*")
			}
		case "routes":
			if ec.Routes = d.RemainingArgs(); len(ec.Routes) == 0 {
				err = d.Errf("routes takes the paths under /v1/ the engine serves beyond its APIs' own, for keys without rules: routes /v1/batches /v1/fine_tuning/*")
			}
		case "display_name", "description", "metadata":
			err = parseAbout(d, ec)
		case "unlisted":
			ec.Unlisted = true
			if d.CountRemainingArgs() > 0 {
				ec.Unlisted, err = parseOnOff(d)
			}
		case "api":
			ec.APIs = d.RemainingArgs()
			if len(ec.APIs) == 0 {
				err = d.ArgErr()
			}
		case "translate":
			var b bool
			if b, err = parseOnOff(d); err == nil {
				ec.Translate = &b
			}
		case "api_key":
			args := d.RemainingArgs()
			switch len(args) {
			case 1:
				ec.APIKey = args[0]
			case 2:
				ec.APIKey, ec.APIKeyHeader = args[0], args[1]
			default:
				err = d.Errf("api_key takes a key and optionally the header to send it in")
			}
		case "cmd":
			ec.Cmd = d.RemainingArgs()
			if len(ec.Cmd) == 0 {
				err = d.ArgErr()
			} else {
				err = checkValues(d, "cmd", ec.Cmd...)
			}
		case "dir":
			err = oneArg(d, &ec.Dir)
			if err == nil {
				err = requireEnv(d, "dir", ec.Dir)
			}
		case "env":
			args := d.RemainingArgs()
			switch {
			case len(args) == 1 && strings.Contains(args[0], "="):
				ec.Env = append(ec.Env, args[0])
			case len(args) == 2 && !strings.Contains(args[0], "="):
				ec.Env = append(ec.Env, args[0]+"="+args[1])
			default:
				err = d.Errf("env takes KEY=VALUE or KEY VALUE")
			}
		case "ready":
			err = oneArg(d, &ec.Ready)
			if err == nil && !strings.HasPrefix(ec.Ready, "/") && ec.Ready != engines.ReadyNone {
				err = d.Errf("ready takes a path starting with '/', or none, not %q", ec.Ready)
			}
		case "wake":
			var b bool
			b, err = parseOnOff(d)
			ec.Wake = &b
		case "group":
			err = oneArg(d, &ec.Group)
		case "memory":
			ec.Memory, err = sizeArg(d)
		case "devices":
			args := d.RemainingArgs()
			if ec.Devices, err = engines.ParseDevices(args...); err != nil {
				err = d.Errf("%v", err)
			}
		case "min_loaded":
			err = durationArg(d, &ec.MinLoaded)
		case "evict":
			err = oneArg(d, &ec.Evict)
			if err == nil && ec.Evict != engines.EvictIdle && ec.Evict != engines.EvictNever {
				err = d.Errf("evict takes idle or never, not %q", ec.Evict)
			}
		case "start_timeout":
			err = durationArg(d, &ec.StartTimeout)
		case "idle_timeout":
			err = durationArg(d, &ec.IdleTimeout)
		case "stop_timeout":
			err = durationArg(d, &ec.StopTimeout)
		case "stop_cmd":
			ec.StopCmd = d.RemainingArgs()
			if len(ec.StopCmd) == 0 {
				err = d.Errf("stop_cmd takes a program and its arguments: stop_cmd docker stop <name>")
			} else {
				err = checkValues(d, "stop_cmd", ec.StopCmd...)
			}
		case "preload":
			ec.Preload = true
			if d.CountRemainingArgs() > 0 {
				ec.Preload, err = parseOnOff(d)
			}
		case "max_concurrent":
			err = countArg(d, &ec.MaxConcurrent, 1)
		case "max_output_tokens":
			var v string
			if err = oneArg(d, &v); err == nil {
				if ec.MaxOutputTokens, err = quota.ParseCount(v); err != nil || ec.MaxOutputTokens < 1 {
					err = d.Errf("max_output_tokens takes a token count such as 8192 or 32k, not %q", v)
				}
			}
		case "queue":
			ec.Queue, ec.QueueTimeout, err = parseQueue(d)
		case "dial_timeout":
			err = durationArg(d, &ec.DialTimeout)
		case "header_timeout":
			err = durationArg(d, &ec.HeaderTimeout)
		case "request_timeout":
			err = durationArg(d, &ec.RequestTimeout)
		case "first_token_timeout":
			err = durationArg(d, &ec.FirstTokenTimeout)
		case "stream_idle_timeout":
			err = durationArg(d, &ec.StreamIdleTimeout)
		case "fallback":
			err = oneArg(d, &ec.Fallback)
		case "fallback_after":
			err = durationArg(d, &ec.FallbackAfter)
		case "fallback_model":
			err = oneArg(d, &ec.FallbackModel)
		case "context_fallback":
			err = oneArg(d, &ec.ContextFallback)
		case "retries":
			var s string
			if err = oneArg(d, &s); err == nil {
				n, convErr := strconv.Atoi(s)
				if convErr != nil || n < 0 {
					err = d.Errf("retries takes a count of 0 or more, not %q", s)
				}
				ec.Retries = &n
			}
		case "resume":
			var b bool
			b, err = parseOnOff(d)
			ec.Resume = &b
		case "loading_status":
			var b bool
			b, err = parseOnOff(d)
			ec.LoadingStatus = &b
		case "prefill":
			var b bool
			b, err = parseOnOff(d)
			ec.Prefill = &b
		case "retry_after_max":
			err = durationArg(d, &ec.RetryAfterMax)
		case "hangup_grace":
			err = durationArg(d, &ec.HangupGrace)
		case "breaker":
			ec.BreakerFailures, ec.BreakerCooldown, err = parseBreaker(d)
		case "transport":
			ec.Transport, err = parseTransport(d)
		case "set":
			args := d.RemainingArgs()
			if len(args) != 2 {
				err = d.Errf("set takes a path and a JSON value: set temperature 0.6, set stop `[\"</s>\"]`")
				break
			}
			ec.Set = append(ec.Set, engines.BodySetting{Path: args[0], Value: json.RawMessage(args[1])})
			if ferr := ec.ValidateFilters(); ferr != nil {
				err = d.Errf("%v", ferr)
			}
		case "strip":
			args := d.RemainingArgs()
			if len(args) == 0 {
				err = d.ArgErr()
				break
			}
			ec.Strip = append(ec.Strip, args...)
			if ferr := ec.ValidateFilters(); ferr != nil {
				err = d.Errf("%v", ferr)
			}
		case "models_from":
			ec.ModelsFrom = "/v1/models"
			if d.NextArg() {
				ec.ModelsFrom = d.Val()
			}
			if d.NextArg() {
				err = d.ArgErr()
			} else if !strings.HasPrefix(ec.ModelsFrom, "/") {
				err = d.Errf("models_from takes a path starting with '/', not %q", ec.ModelsFrom)
			}
		case "health_interval":
			err = durationArg(d, &ec.HealthInterval)
		case "health_path":
			err = oneArg(d, &ec.HealthPath)
			if err == nil && !strings.HasPrefix(ec.HealthPath, "/") {
				err = d.Errf("health_path takes a path starting with '/', not %q", ec.HealthPath)
			}
		case "health_timeout":
			err = durationArg(d, &ec.HealthTimeout)
		case "health_passes":
			err = countArg(d, &ec.HealthPasses, 1)
		case "health_fails":
			err = countArg(d, &ec.HealthFails, 1)
		case "signals":
			err = oneArg(d, &ec.Signals)
			if err == nil && ec.Signals != engines.SignalsMetrics && ec.Signals != engines.SignalsOff {
				err = d.Errf("signals takes metrics or off, not %q", ec.Signals)
			}
		case "signals_path":
			err = oneArg(d, &ec.SignalsPath)
			if err == nil && !strings.HasPrefix(ec.SignalsPath, "/") {
				err = d.Errf("signals_path takes a path starting with '/', not %q", ec.SignalsPath)
			}
		case "signals_slots_path":
			err = oneArg(d, &ec.SignalsSlotsPath)
			if err == nil && ec.SignalsSlotsPath != engines.SignalsOff && !strings.HasPrefix(ec.SignalsSlotsPath, "/") {
				err = d.Errf("signals_slots_path takes a path starting with '/' or off, not %q", ec.SignalsSlotsPath)
			}
		case "signals_interval":
			err = durationArg(d, &ec.SignalsInterval)
		case "signals_stale":
			err = durationArg(d, &ec.SignalsStale)
		case "swap":
			err = parseSwap(d, ec)
		case "sleep_after":
			err = durationArg(d, &ec.SleepAfter)
		case "slots":
			ec.Slots, err = parseSlots(d)
		case "hedge_after", "hedge_budget":
			_, err = hedgeOption(d, &ec.Hedge)
		default:
			if slices.Contains(providerLines(), sub) {
				lines = append(lines, d.NextSegment()) // its provider's, once the block is read
				break
			}
			err = unknownSubdirective(d, "engine", where, append(engineOptions, providerLines()...))
		}
		if err != nil {
			return set, nil, err
		}
	}
	if ec.Provider == nil {
		return set, lines, nil
	}
	return set, nil, offerLines(ec, lines)
}

// parseBreaker parses `breaker <failures> [<cool-down>]`.
func parseBreaker(d *cf.Dispenser) (int, caddy.Duration, error) {
	return countAndDuration(d, "failure count", "cool-down", "breaker 5 30s")
}

// parseQueue parses `queue <n> [<timeout>]`.
func parseQueue(d *cf.Dispenser) (int, caddy.Duration, error) {
	return countAndDuration(d, "length", "timeout", "queue 8 30s")
}

// parseTransport parses `transport http { … }` by handing the block to Caddy's
// own HTTP transport module, so every option reverse_proxy's transport takes
// means the same here, and returns it as the JSON module object that
// reverse_proxy's "transport" field holds.
func parseTransport(d *cf.Dispenser) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	if d.Val() != "http" {
		return nil, d.Errf("transport %q is not supported: use transport http { … } (Caddy's HTTP transport)", d.Val())
	}
	var t reverseproxy.HTTPTransport
	if err := t.UnmarshalCaddyfile(d.NewFromNextSegment()); err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(&t, "protocol", "http", nil), nil
}
