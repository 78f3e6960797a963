package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// One box, many models, through Caddy with the OpenAI SDK: a
// memory budget that holds two of three engines; the third's request stops
// the least recently used idle one, and the admin API says what is loaded.
func TestAMemoryBudgetSwapsTheLeastRecentlyUsedEngineThroughCaddy(t *testing.T) {
	startGateway(t, `
		memory_budget 20GiB
		engine a {
			`+engineCmd("--model a")+`
			models a
			memory 10GiB
		}
		engine b {
			`+engineCmd("--model b")+`
			models b
			memory 10GiB
		}
		engine c {
			`+engineCmd("--model c")+`
			models c
			memory 10GiB
		}`)
	client := sdk("")
	ctx := context.Background()
	for _, model := range []string{"a", "b", "a", "c"} {
		if _, err := client.Chat.Completions.New(ctx, chatParams(model, "hi")); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	// b was used before a's second request: it made room for c
	for name, want := range map[string]string{"a": "ready", "b": "stopped", "c": "ready"} {
		if s := status(t, name); s.State != want {
			t.Errorf("%s is %s, want %s", name, s.State, want)
		}
	}
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/memory"))
	var use engines.MemoryUse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &use) != nil ||
		use.Used != 20<<30 || use.Budget != 20<<30 || len(use.Loaded) != 2 || use.Loaded[0] != "a" || use.Loaded[1] != "c" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	metrics := scrape(t)
	if sample(t, metrics, "llm_gateway_memory_bytes", `devices="",what="used"`) != 20<<30 || sample(t, metrics, "llm_gateway_memory_bytes", `devices="",what="budget"`) != 20<<30 {
		t.Fatalf("memory metrics:\n%s", grepLines(metrics, "memory"))
	}
}

// A start that min_loaded keeps out past max_wait is refused: 503
// engine_busy whose message names what it waited for and whose Retry-After
// is when room may come; the admin API and the metrics count it, and say
// why the engine that was kept last started.
func TestAStartMinLoadedKeepsOutIs503EngineBusyNamingWhatItWaitsFor(t *testing.T) {
	startGateway(t, `
		memory_budget 10GiB
		max_wait 200ms
		engine warm {
			`+engineCmd("--model warm")+`
			models warm
			memory 10GiB
			min_loaded 30s
		}
		engine cold {
			`+engineCmd("--model cold")+`
			models cold
			memory 10GiB
		}`)
	mustAnswer(t, "warm")
	resp, body := post(t, "/v1/chat/completions", `{"model":"cold"}`)
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "engine_busy" ||
		!strings.Contains(e.Error.Message, "engine cold is waiting for room: it needs 10 GiB of the memory_budget, held by warm (min_loaded for ") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 25 || ra > 30 {
		t.Fatalf("Retry-After %q, want when warm's min_loaded ends (about 30)", resp.Header.Get("Retry-After"))
	}
	_, body = do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/memory"))
	var s engines.Scheduler
	if json.Unmarshal([]byte(body), &s) != nil || s.Refused != 1 || len(s.Engines) != 2 || s.Engines[1].Name != "warm" ||
		!strings.HasPrefix(s.Engines[1].Held, "min_loaded for ") || s.Engines[1].Why.Started != "request" {
		t.Fatalf("admin: %s", body)
	}
	if n := sample(t, scrape(t), "llm_gateway_scheduler_refusals_total", `devices="",group=""`); n != 1 {
		t.Fatalf("refusals %v", n)
	}
}

// Device sets through Caddy: each set is scheduled on its own (a start on
// device 0 stops an engine of device 0, never one of device 1), the admin
// API and the metrics say each set's use, and an engine remembers the
// priority of the requests it served.
func TestDeviceSetsAreScheduledApartThroughCaddy(t *testing.T) {
	startGateway(t, `
		memory_budget 10GiB devices 0
		memory_budget 10GiB devices 1
		key ops ops-key-0123456789abcdef {
			priority 5
		}
		engine a {
			`+engineCmd("--model a")+`
			models a
			memory 10GiB
			devices 0
		}
		engine b {
			`+engineCmd("--model b")+`
			models b
			memory 10GiB
			devices 1
		}
		engine c {
			`+engineCmd("--model c")+`
			models c
			memory 10GiB
			devices 0
		}`)
	for _, model := range []string{"a", "b", "c"} {
		resp, body := post(t, "/v1/chat/completions", `{"model":"`+model+`"}`, "Authorization", "Bearer ops-key-0123456789abcdef")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
		}
	}
	for name, want := range map[string]string{"a": "stopped", "b": "ready", "c": "ready"} {
		if s := status(t, name); s.State != want {
			t.Errorf("%s is %s, want %s", name, s.State, want)
		}
	}
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/memory"))
	var s engines.Scheduler
	if json.Unmarshal([]byte(body), &s) != nil || len(s.Sets) != 2 || s.Sets[0].Devices != "0" || s.Sets[0].Swaps != 1 ||
		s.Sets[1].Devices != "1" || s.Sets[1].Swaps != 0 || s.Sets[1].Engines[0].Priority != 5 {
		t.Fatalf("admin: %s", body)
	}
	if a := s.Sets[0].Engines[0]; a.Name != "a" || a.Why.Stopped != "room for c (needs 10 GiB of the memory_budget of devices 0)" {
		t.Fatalf("a: %+v", a)
	}
	metrics := scrape(t)
	if sample(t, metrics, "llm_gateway_memory_bytes", `devices="1",what="used"`) != 10<<30 ||
		sample(t, metrics, "llm_gateway_swaps_total", `devices="0",group=""`) != 1 ||
		sample(t, metrics, "llm_gateway_scheduler_stops_total", `devices="0",group="",reason="room"`) != 1 {
		t.Fatalf("metrics:\n%s", grepLines(metrics, "devices="))
	}
}
