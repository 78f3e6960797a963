package caddymodule

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// preloadSite is a whole Caddyfile with one engine, preloaded or not, whose
// starts Caddy reports as events to the test's recorder; extra goes into
// the handler.
func preloadSite(preload bool, extra string) string {
	line := ""
	if preload {
		line = "preload"
	}
	return fmt.Sprintf(`{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
	grace_period 1ns
	events {
		on llm_gateway.engine_started llmgw_test_recorder
	}
}
http://%s {
	llm_gateway {
		engine warm {
			%s
			models warm
			%s
		}
		%s
	}
}`, gwAddr, engineCmd(""), line, extra)
}

// forgetEvents clears what the recorder heard.
func forgetEvents() {
	heard.Lock()
	heard.events = nil
	heard.Unlock()
	for {
		select {
		case <-heard.signal:
		default:
			return
		}
	}
}

// awaitEvent waits until the recorder heard event (name and engine).
func awaitEvent(t *testing.T, event string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		heard.Lock()
		for _, e := range heard.events {
			if e == event {
				heard.Unlock()
				return
			}
		}
		heard.Unlock()
		select {
		case <-heard.signal:
		case <-deadline:
			t.Fatalf("never heard %s", event)
		}
	}
}

// validate runs what `caddy validate` runs on a Caddyfile: adapt, load and
// provision every module, start nothing.
func validate(t *testing.T, caddyfile string) {
	t.Helper()
	cfgJSON, _, err := adaptCaddyfile([]byte(withPorts(caddyfile)))
	if err != nil {
		t.Fatal(err)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatal(err)
	}
}

func TestPreloadStartsTheEngineWhenTheConfigRunsNeverOnValidate(t *testing.T) {
	starts := startsFile(t)
	forgetEvents()
	// the engine, stopped, as a running config has it (after one without
	// it, so that no earlier test's engine is kept)
	initRaw(t, `{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
}
http://`+gwAddr+` {
	respond "no gateway"
}`)
	initRaw(t, preloadSite(false, ""))
	if s := status(t, "warm"); s.State != "stopped" {
		t.Fatalf("without preload: %s", s.State)
	}

	// validating the preload config provisions the very same engine (a
	// preload line does not change what runs) and must not start it
	validate(t, preloadSite(true, ""))
	if s := status(t, "warm"); s.State != "stopped" || s.LastError != "" {
		t.Fatalf("caddy validate started a preload engine: %+v", s)
	}

	// running it does, with no request
	initRaw(t, preloadSite(true, ""))
	awaitEvent(t, "llm_gateway.engine_started warm")
	s := status(t, "warm")
	if s.State != "ready" || countStarts(t, starts) != 1 {
		t.Fatalf("after the preload: %s, %d starts", s.State, countStarts(t, starts))
	}

	// a reload that keeps the engine keeps its process
	initRaw(t, preloadSite(true, "keepalive 2s"))
	if again := status(t, "warm"); again.State != "ready" || again.PID != s.PID || countStarts(t, starts) != 1 {
		t.Fatalf("the reload restarted the preloaded engine: pid %d → %d (%s), %d starts", s.PID, again.PID, again.State, countStarts(t, starts))
	}
	resp, body := post(t, "/v1/chat/completions", `{"model":"warm"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := countStarts(t, starts); n != 1 {
		t.Fatalf("%d starts, want the preload's only", n)
	}
}
