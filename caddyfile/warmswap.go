package caddyfile

import (
	"strings"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Warm swaps: an engine's
//
//	swap stop|sleep {            # the block only with sleep
//		sleep_path    <path>     # /sleep?level=1
//		wake_path     <path>     # /wake_up
//		sleeping_path <path>|none # /is_sleeping
//	}
//	sleep_after <duration>
//	slots save <dir> {           # the block is optional
//		parallel     <n>         # 1 (llama-server's --parallel)
//		max_sessions <n>         # 64
//		save_path    <path>      # /slots/{id}?action=save
//		restore_path <path>      # /slots/{id}?action=restore
//		timeout      <duration>  # 3s: each save or restore call
//	}
//
// The endpoints sit in a block under the mode they belong to rather than as
// engine options of their own: they mean nothing with swap stop (a block
// there is an error, not a silent no-op), and the common case stays one
// line, `swap sleep`, for vLLM's defaults.

var (
	swapOptions  = []string{"sleep_path", "wake_path", "sleeping_path"}
	slotsOptions = []string{"parallel", "max_sessions", "save_path", "restore_path", "timeout"}
)

// parseSwap parses `swap stop|sleep [{ … }]`.
func parseSwap(d *cf.Dispenser, ec *engines.Config) error {
	if !d.NextArg() {
		return d.Errf("swap takes stop or sleep")
	}
	switch ec.Swap = d.Val(); ec.Swap {
	case engines.SwapStop, engines.SwapSleep:
	default:
		return d.Errf("swap takes stop or sleep, not %q", ec.Swap)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if ec.Swap != engines.SwapSleep {
			return d.Errf("swap stop takes no block: the sleep endpoints are for swap sleep")
		}
		if err := set.once(d); err != nil {
			return err
		}
		if ec.Sleep == nil {
			ec.Sleep = &engines.SleepPaths{}
		}
		var dst *string
		switch d.Val() {
		case "sleep_path":
			dst = &ec.Sleep.SleepPath
		case "wake_path":
			dst = &ec.Sleep.WakePath
		case "sleeping_path":
			dst = &ec.Sleep.SleepingPath
		default:
			return unknownSubdirective(d, "swap", "swap sleep", swapOptions)
		}
		name := d.Val()
		if err := oneArg(d, dst); err != nil {
			return err
		}
		if !strings.HasPrefix(*dst, "/") && !(name == "sleeping_path" && *dst == engines.ReadyNone) {
			return d.Errf("%s takes a path starting with '/', not %q", name, *dst)
		}
	}
	return nil
}

// parseSlots parses `slots save <dir> [{ … }]`.
func parseSlots(d *cf.Dispenser) (*engines.SlotsConfig, error) {
	args := d.RemainingArgs()
	if len(args) != 2 || args[0] != "save" {
		return nil, d.Errf("slots takes save and the engine's slot directory (its --slot-save-path): slots save /var/cache/slots")
	}
	s := &engines.SlotsConfig{Dir: args[1]}
	if err := requireEnv(d, "slots", s.Dir); err != nil {
		return nil, err
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := set.once(d); err != nil {
			return nil, err
		}
		var err error
		switch name := d.Val(); name {
		case "parallel":
			err = countArg(d, &s.Parallel, 1)
		case "max_sessions":
			err = countArg(d, &s.MaxSessions, 1)
		case "timeout":
			err = durationArg(d, &s.Timeout)
		case "save_path", "restore_path":
			dst := &s.SavePath
			if name == "restore_path" {
				dst = &s.RestorePath
			}
			if err = oneArg(d, dst); err == nil && (!strings.HasPrefix(*dst, "/") || !strings.Contains(*dst, "{id}")) {
				err = d.Errf("%s takes a path starting with '/' with {id} for the slot, not %q", name, *dst)
			}
		default:
			err = unknownSubdirective(d, "slots", "slots save", slotsOptions)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}
