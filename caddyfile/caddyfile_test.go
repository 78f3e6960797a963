package caddyfile

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/providers/gemini"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// remote is an engine block that satisfies Validate, for cases about
// something else.
const remote = `
	engine openai {
		to https://api.openai.com
		models gpt-4o
	}`

func parse(t *testing.T, input string) hconfig.Config {
	t.Helper()
	cfg, err := Parse(cf.NewTestDispenser(input))
	if err != nil {
		t.Fatalf("%v\n%s", err, input)
	}
	return cfg
}

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) caddy.Duration { return caddy.Duration(d) }

func TestParseEverySubdirective(t *testing.T) {
	t.Setenv("ALICE_KEY", "sk-alice-key-0123456789") // a named key's variable must be set
	openai := engines.Config{Name: "openai", To: "https://api.openai.com", Models: []string{"gpt-4o"}}
	for _, tc := range []struct {
		name  string
		input string
		want  hconfig.Config
	}{
		{"one remote engine", `llm_gateway {` + remote + `
}`, hconfig.Config{Engines: []engines.Config{openai}}},
		{"keys", `llm_gateway {
	keys {env.GATEWAY_KEYS} sk-gateway-key-one
	keys sk-gateway-key-two` + remote + `
}`, hconfig.Config{
			Keys:    []hconfig.Key{{Value: "{env.GATEWAY_KEYS}"}, {Value: "sk-gateway-key-one"}, {Value: "sk-gateway-key-two"}},
			Engines: []engines.Config{openai},
		}},
		{"named key among keys", `llm_gateway {
	keys sk-gateway-key-one
	key alice {env.ALICE_KEY}` + remote + `
}`, hconfig.Config{
			Keys:    []hconfig.Key{{Value: "sk-gateway-key-one"}, {Name: "alice", Value: "{env.ALICE_KEY}"}},
			Engines: []engines.Config{openai},
		}},
		{"max_body in IEC units", `llm_gateway {
	max_body 1MiB` + remote + `
}`, hconfig.Config{MaxBody: 1 << 20, Engines: []engines.Config{openai}}},
		{"max_body in SI units", `llm_gateway {
	max_body 10MB` + remote + `
}`, hconfig.Config{MaxBody: 10_000_000, Engines: []engines.Config{openai}}},
		{"max_body in bytes", `llm_gateway {
	max_body 4096` + remote + `
}`, hconfig.Config{MaxBody: 4096, Engines: []engines.Config{openai}}},
		{"max_body_in_flight", `llm_gateway {
	max_body_in_flight 128MiB` + remote + `
}`, hconfig.Config{MaxBodyInFlight: 128 << 20, Engines: []engines.Config{openai}}},
		{"wake off", `llm_gateway {
	wake off` + remote + `
}`, hconfig.Config{Wake: ptr(false), Engines: []engines.Config{openai}}},
		{"wake true", `llm_gateway {
	wake true` + remote + `
}`, hconfig.Config{Wake: ptr(true), Engines: []engines.Config{openai}}},
		{"keepalive", `llm_gateway {
	keepalive 500ms` + remote + `
}`, hconfig.Config{KeepAlive: dur(500 * time.Millisecond), Engines: []engines.Config{openai}}},
		{"an engine with every subdirective", `llm_gateway {
	engine llama {
		to http://127.0.0.1:{engine.port}/base
		models llama-3.1-8b llama
		model_name Meta-Llama-3.1-8B-Instruct-Q4_K_M
		api_key {env.LLAMA_KEY}
		cmd /usr/local/bin/llama-server -m "/srv/models/llama 3.1.gguf" --port {engine.port}
		dir /srv/models
		env CUDA_VISIBLE_DEVICES=0
		env LLAMA_ARG_CTX_SIZE 8192
		env EMPTY=
		ready /v1/models
		wake off
		group gpu0
		start_timeout 2m
		idle_timeout 10m
		stop_timeout 5s
		dial_timeout 1s
		header_timeout 90s
		request_timeout 1h30m
		first_token_timeout 45s
		stream_idle_timeout 2m
		fallback openai
		fallback_after 3s
		fallback_model gpt-4o-mini
		context_fallback openai/gpt-4.1
		retries 3
		retry_after_max 20s
		breaker 4 45s
	}` + remote + `
}`, hconfig.Config{Engines: []engines.Config{{
			Name:           "llama",
			To:             "http://127.0.0.1:{engine.port}/base",
			Models:         []string{"llama-3.1-8b", "llama"},
			ModelName:      "Meta-Llama-3.1-8B-Instruct-Q4_K_M",
			APIKey:         "{env.LLAMA_KEY}",
			Cmd:            []string{"/usr/local/bin/llama-server", "-m", "/srv/models/llama 3.1.gguf", "--port", "{engine.port}"},
			Dir:            "/srv/models",
			Env:            []string{"CUDA_VISIBLE_DEVICES=0", "LLAMA_ARG_CTX_SIZE=8192", "EMPTY="},
			Ready:          "/v1/models",
			Wake:           ptr(false),
			Group:          "gpu0",
			StartTimeout:   dur(2 * time.Minute),
			IdleTimeout:    dur(10 * time.Minute),
			StopTimeout:    dur(5 * time.Second),
			DialTimeout:    dur(time.Second),
			HeaderTimeout:  dur(90 * time.Second),
			RequestTimeout: dur(90 * time.Minute),

			FirstTokenTimeout: dur(45 * time.Second),
			StreamIdleTimeout: dur(2 * time.Minute),
			Fallback:          "openai",
			FallbackAfter:     dur(3 * time.Second),
			FallbackModel:     "gpt-4o-mini",
			ContextFallback:   "openai/gpt-4.1",
			Retries:           ptr(3),
			RetryAfterMax:     dur(20 * time.Second),
			BreakerFailures:   4,
			BreakerCooldown:   dur(45 * time.Second),
		}, openai}}},
		{"no retries, a breaker without a cool-down", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		retries 0
		breaker 1
	}
}`, hconfig.Config{Engines: []engines.Config{{
			Name: "openai", To: "https://api.openai.com", Models: []string{"gpt-4o"}, Retries: ptr(0), BreakerFailures: 1,
		}}}},
		{"context_fallback to an engine without a model", `llm_gateway {
	engine small {
		to http://10.0.0.1:8000
		models small
		context_fallback big
	}
	engine big {
		to http://10.0.0.2:8000
		models big
	}
}`, hconfig.Config{Engines: []engines.Config{
			{Name: "small", To: "http://10.0.0.1:8000", Models: []string{"small"}, ContextFallback: "big"},
			{Name: "big", To: "http://10.0.0.2:8000", Models: []string{"big"}},
		}}},
		{"api_key in its own header", `llm_gateway {
	engine anthropic {
		to https://api.anthropic.com
		models claude
		api_key {env.ANTHROPIC_API_KEY} x-api-key
	}
}`, hconfig.Config{Engines: []engines.Config{{
			Name: "anthropic", To: "https://api.anthropic.com", Models: []string{"claude"},
			APIKey: "{env.ANTHROPIC_API_KEY}", APIKeyHeader: "x-api-key",
		}}}},
		{"wake on for one engine", `llm_gateway {
	wake off
	engine openai {
		to https://api.openai.com
		models gpt-4o
		wake on
	}
}`, hconfig.Config{Wake: ptr(false), Engines: []engines.Config{{
			Name: "openai", To: "https://api.openai.com", Models: []string{"gpt-4o"}, Wake: ptr(true),
		}}}},
		{"stop_cmd, preload, max_concurrent and queue (issue 15)", `llm_gateway {
	engine qwen {
		cmd docker run --rm --name qwen -p {engine.port}:8080 qwen-image
		to http://127.0.0.1:{engine.port}
		models qwen
		stop_cmd docker stop qwen {engine.pid} {engine.port}
		preload
		max_concurrent 4
		queue 8 30s
	}
	engine small {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models small
		preload off
		max_concurrent 1
		queue 2
	}
}`, hconfig.Config{Engines: []engines.Config{
			{Name: "qwen", To: "http://127.0.0.1:{engine.port}", Models: []string{"qwen"},
				Cmd:     []string{"docker", "run", "--rm", "--name", "qwen", "-p", "{engine.port}:8080", "qwen-image"},
				StopCmd: []string{"docker", "stop", "qwen", "{engine.pid}", "{engine.port}"},
				Preload: true, MaxConcurrent: 4, Queue: 8, QueueTimeout: dur(30 * time.Second)},
			{Name: "small", To: "http://127.0.0.1:{engine.port}", Models: []string{"small"},
				Cmd: []string{"llama-server", "--port", "{engine.port}"}, MaxConcurrent: 1, Queue: 2},
		}}},
		{"durations in days", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		idle_timeout 1d
		request_timeout 0
	}
}`, hconfig.Config{Engines: []engines.Config{{
			Name: "openai", To: "https://api.openai.com", Models: []string{"gpt-4o"}, IdleTimeout: dur(24 * time.Hour),
		}}}},
		{"pools, resume, prefill, body fallbacks, annotate", `llm_gateway {
	body_fallbacks off
	annotate_response on
	trace_content on
	engine a {
		to http://10.0.0.1:8000
		models m1
		fallback b
		resume on
	}
	engine b {
		to http://10.0.0.2:8000
		models m2
		prefill on
	}
	pool auto {
		member a
		member b/m2-big
		sticky body prompt_cache_key
		failover 3 45s
		breaker 2 10s
	}
	pool chat {
		member a
		sticky header X-Session-Id
	}
	pool rr {
		member a
		member b
		balance round_robin
	}
	pool tuned {
		member a
		member b
		balance affinity {
			cache_threshold 0.5
			balance_abs_threshold 16
			balance_rel_threshold 2
			block 512
			index_size 4096
		}
	}
}`, hconfig.Config{
			BodyFallbacks:    ptr(false),
			AnnotateResponse: true,
			TraceContent:     true,
			Engines: []engines.Config{
				{Name: "a", To: "http://10.0.0.1:8000", Models: []string{"m1"}, Fallback: "b", Resume: new(true)},
				{Name: "b", To: "http://10.0.0.2:8000", Models: []string{"m2"}, Prefill: new(true)},
			},
			Pools: []hconfig.PoolConfig{
				{Name: "auto", Members: []string{"a", "b/m2-big"}, StickyBody: "prompt_cache_key",
					FailoverAttempts: 3, FailoverTime: dur(45 * time.Second), BreakerFailures: 2, BreakerCooldown: dur(10 * time.Second)},
				{Name: "chat", Members: []string{"a"}, StickyHeader: "X-Session-Id"},
				{Name: "rr", Members: []string{"a", "b"}, Balance: &hconfig.Balance{Policy: "round_robin"}},
				{Name: "tuned", Members: []string{"a", "b"}, Balance: &hconfig.Balance{Policy: "affinity",
					CacheThreshold: 0.5, AbsThreshold: 16, RelThreshold: 2, Block: 512, IndexSize: 4096}},
			},
		}},
		{"{engine.name} in a defaults cmd, ready none (issue 28)", `llm_gateway {
	defaults {
		cmd llama-server -m /models/{engine.name}.gguf --port {engine.port}
		to http://127.0.0.1:{engine.port}
		ready none
	}
	engine qwen {
		models qwen
	}
}`, hconfig.Config{
			Defaults: &engines.Config{Cmd: []string{"llama-server", "-m", "/models/{engine.name}.gguf", "--port", "{engine.port}"},
				To: "http://127.0.0.1:{engine.port}", Ready: "none"},
			Engines: []engines.Config{{Name: "qwen", Models: []string{"qwen"}}},
		}},
		{"a provider's allow_media", `llm_gateway {
	engine gem {
		provider gemini
		api_key {env.GEMINI_API_KEY}
		models gemini-2.5-flash
		allow_media gs file_id
	}
}`, hconfig.Config{Engines: []engines.Config{
			{Name: "gem", ProviderRaw: json.RawMessage(`{"name":"gemini"}`), Provider: new(gemini.Gemini), APIKey: "{env.GEMINI_API_KEY}", Models: []string{"gemini-2.5-flash"}, AllowMedia: []string{"gs", "file_id"}},
		}}},
		{"engines keep their order", `llm_gateway {
	engine b {
		to http://10.0.0.2:8000
		models m2
	}
	engine a {
		to http://10.0.0.1:8000
		models m1
	}
}`, hconfig.Config{Engines: []engines.Config{
			{Name: "b", To: "http://10.0.0.2:8000", Models: []string{"m2"}},
			{Name: "a", To: "http://10.0.0.1:8000", Models: []string{"m1"}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parse(t, tc.input)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", asJSON(t, got), asJSON(t, tc.want))
			}
		})
	}
}

func asJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseErrorsNameTheProblemAndTheLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		msg   string
		line  int
	}{
		{"an argument after the directive", `llm_gateway on {` + remote + `
}`, "wrong argument count", 1},
		{"to set twice", `llm_gateway {
	engine a {
		to http://127.0.0.1:1
		models a
		to http://127.0.0.1:2
	}
}`, "to is set twice in this block (first at Testfile:3)", 5},
		{"allow_media without a kind", `llm_gateway {
	engine a {
		provider gemini
		models a
		allow_media
	}
}`, "allow_media takes the media references a provider may be sent", 5},
		{"routes without a path", `llm_gateway {
	engine a {
		to http://127.0.0.1:2
		models a
		routes
	}
}`, "routes takes the paths under /v1/ the engine serves beyond its APIs' own", 5},
		{"a pool's breaker set twice", `llm_gateway {` + remote + `
	pool auto {
		member openai
		breaker 3
		breaker 4
	}
}`, "breaker is set twice in this block (first at Testfile:8)", 9},
		{"max_body set twice", `llm_gateway {
	max_body 1MiB` + remote + `
	max_body 2MiB
}`, "max_body is set twice in this block (first at Testfile:2)", 7},
		{"an engine defined twice", `llm_gateway {` + remote + remote + `
}`, "engine openai is defined twice (first at Testfile:2)", 6},
		{"a chained fallback points at its engine", `llm_gateway {` + remote + `
	engine a {
		to http://127.0.0.1:1
		models a
		fallback b
	}
	engine b {
		to http://127.0.0.1:2
		models b
		fallback openai
	}
}`, "fallbacks do not chain", 6},
		{"a pool member that is no engine", `llm_gateway {` + remote + `
	pool auto {
		member nope
	}
}`, "member nope is not an engine of this handler", 6},
		{"a pool without members", `llm_gateway {` + remote + `
	pool auto {
		sticky header X
	}
}`, "pool auto has no members", 8},
		{"a bad sticky source", `llm_gateway {` + remote + `
	pool auto {
		member openai
		sticky body messages
	}
}`, "sticky body takes user or prompt_cache_key", 8},
		{"an unknown pool subdirective", `llm_gateway {` + remote + `
	pool auto {
		members openai
	}
}`, `unknown pool subdirective "members"`, 7},
		{"unknown subdirective", `llm_gateway {
	keys sk-gateway-key-one
	max_bodies 1MiB` + remote + `
}`, `unknown llm_gateway subdirective "max_bodies"`, 3},
		{"unknown engine subdirective", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		idle 5m
	}
}`, `unknown engine subdirective "idle" in engine openai`, 5},
		{"an engine subdirective at handler level", `llm_gateway {
	models gpt-4o` + remote + `
}`, `unknown llm_gateway subdirective "models" (an engine option: write it in an engine block, or in defaults for every engine)`, 2},
		{"a handler subdirective in an engine", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		max_body 1MiB
	}
}`, `unknown engine subdirective "max_body" in engine openai (an option of the whole handler: write it in the llm_gateway block, outside the engines)`, 5},
		{"engine without a name", `llm_gateway {
	engine {
		to https://api.openai.com
	}
}`, "engine needs a name", 2},
		{"engine with two names", `llm_gateway {
	engine open ai {
		to https://api.openai.com
		models gpt-4o
	}
}`, "wrong argument count", 2},
		{"engine name with a slash", `llm_gateway {
	engine open/ai {
		to https://api.openai.com
		models gpt-4o
	}
}`, "may not contain '/'", 2},
		{"missing to", `llm_gateway {
	keys sk-gateway-key-one

	engine openai {
		models gpt-4o
	}
}`, "engine openai: missing 'to'", 4},
		{"to without a URL", `llm_gateway {
	engine openai {
		to
		models gpt-4o
	}
}`, "wrong argument count", 3},
		{"to not http", `llm_gateway {
	engine openai {
		to ftp://api.openai.com
		models gpt-4o
	}
}`, "'to' must be an http:// or https:// URL", 2},
		{"to without a host", `llm_gateway {
	engine openai {
		to http:///v1
		models gpt-4o
	}
}`, "'to' has no host", 2},
		{"missing models", `llm_gateway {
	engine openai {
		to https://api.openai.com
	}
}`, "engine openai: missing 'models'", 2},
		{"models without a name", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models
	}
}`, "wrong argument count", 4},
		{"a model served by two engines", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o gpt-4o-mini
	}
	engine azure {
		to https://example.openai.azure.com
		models o3 gpt-4o-mini
	}
}`, "model gpt-4o-mini is served by both engine openai and engine azure", 6},
		{"an engine defined twice", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
	}

	engine openai {
		to https://api.openai.com
		models o3
	}
}`, "engine openai is defined twice", 7},
		{"a bad duration", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		header_timeout soon
	}
}`, `bad header_timeout "soon"`, 5},
		{"llama-swap's ttl: 60, without a unit (issue 28)", `llm_gateway {
	defaults {
		idle_timeout 60
	}` + remote + `
}`, `bad idle_timeout "60": a duration needs a unit, such as 60s or 5m`, 3},
		{"a typo'd engine subdirective suggests the nearest (issue 28)", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		idel_timeout 5m
	}
}`, `unknown engine subdirective "idel_timeout" in engine openai (did you mean idle_timeout?)`, 5},
		{"a part of a subdirective's name suggests it", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		concurrent 4
	}
}`, `unknown engine subdirective "concurrent" in engine openai (did you mean max_concurrent?)`, 5},
		{"llama-swap's name of an option says ours", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		ttl 60s
	}
}`, `unknown engine subdirective "ttl" in engine openai (llama-swap's ttl is idle_timeout here)`, 5},
		{"a typo'd handler subdirective suggests the nearest", `llm_gateway {
	max_bodi 1MiB` + remote + `
}`, `unknown llm_gateway subdirective "max_bodi" (did you mean max_body?)`, 2},
		{"a typo'd pool subdirective suggests the nearest", `llm_gateway {` + remote + `
	pool auto {
		member openai
		stiky header X-Session-Id
	}
}`, `unknown pool subdirective "stiky" in pool auto (did you mean sticky?)`, 8},
		{"a typo'd key subdirective suggests the nearest", `llm_gateway {
	key team sk-team-key-0123456789 {
		tokes 200k/d
	}` + remote + `
}`, `unknown key subdirective "tokes" in key team (did you mean tokens?)`, 3},
		{"a word far from every subdirective gets no guess", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		colour blue
	}
}`, `unknown engine subdirective "colour" in engine openai, at`, 5},
		{"a model listed twice on one engine (issue 28)", `llm_gateway {
	engine demo {
		to http://127.0.0.1:9001
		models demo gpt-4o-mini demo
	}
}`, "models: demo is listed twice", 4},
		{"a fallback to an unknown engine given in defaults", `llm_gateway {
	defaults {
		fallback cloud
	}` + remote + `
}`, "engine openai: its fallback cloud is not an engine of this handler", 3},
		{"a duration without a unit", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		start_timeout 300
	}
}`, `bad start_timeout "300": a duration needs a unit, such as 300s or 5m`, 5},
		{"a duration in two words", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		idle_timeout 5 minutes
	}
}`, `idle_timeout takes one duration such as 5m or 90s, not "5 minutes"`, 5},
		{"a negative duration", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		stop_timeout -1s
	}
}`, "stop_timeout may not be negative", 5},
		{"a negative priority_grace", `llm_gateway {
	priority_grace -5s` + remote + `
}`, "priority_grace may not be negative", 2},
		{"priority_grace without a unit", `llm_gateway {
	priority_grace 30` + remote + `
}`, `bad priority_grace "30": a duration needs a unit, such as 30s or 5m`, 2},
		{"a bad max_body", `llm_gateway {
	max_body lots` + remote + `
}`, `bad max_body "lots"`, 2},
		{"a zero max_body", `llm_gateway {
	max_body 0` + remote + `
}`, `bad max_body "0"`, 2},
		{"a negative max_body", `llm_gateway {
	max_body -1MiB` + remote + `
}`, `bad max_body "-1MiB"`, 2},
		{"a bad max_body_in_flight", `llm_gateway {
	max_body_in_flight 0` + remote + `
}`, `bad max_body_in_flight "0"`, 2},
		{"max_body without a size", `llm_gateway {
	max_body` + remote + `
}`, "wrong argument count", 2},
		{"wake with a bad value", `llm_gateway {
	wake sometimes` + remote + `
}`, `wake takes on or off, not "sometimes"`, 2},
		{"engine wake with a bad value", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		wake yes
	}
}`, `wake takes on or off, not "yes"`, 5},
		{"env without a value", `llm_gateway {
	engine llama {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models llama
		env CUDA_VISIBLE_DEVICES
	}
}`, "env takes KEY=VALUE or KEY VALUE", 6},
		{"env with too many words", `llm_gateway {
	engine llama {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models llama
		env A=1 B=2
	}
}`, "env takes KEY=VALUE or KEY VALUE", 6},
		{"env without a key", `llm_gateway {
	engine llama {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models llama
		env =1
	}
}`, `engine llama: env "=1" is not KEY=VALUE`, 2},
		{"ready without a leading slash", `llm_gateway {
	engine llama {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models llama
		ready health
	}
}`, `ready takes a path starting with '/', or none, not "health"`, 6},
		{"{engine.port} without cmd", `llm_gateway {
	engine llama {
		to http://127.0.0.1:{engine.port}
		models llama
	}
}`, "engine llama: {engine.port} needs 'cmd'", 2},
		{"llama-swap's ${PORT} in cmd (issue 28)", `llm_gateway {
	engine qwen {
		cmd llama-server --port ${PORT} -m /models/qwen.gguf
		to http://127.0.0.1:{engine.port}
		models qwen
	}
}`, "cmd: ${PORT} is llama-swap's placeholder and nothing fills it in here: write {engine.port}", 3},
		{"llama-swap's ${PORT} in to", `llm_gateway {
	engine qwen {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:${PORT}
		models qwen
	}
}`, "to: ${PORT} is llama-swap's placeholder", 4},
		{"llama-swap's ${MODEL_ID} in cmd", `llm_gateway {
	engine qwen {
		cmd llama-server --port {engine.port} --alias ${MODEL_ID}
		to http://127.0.0.1:{engine.port}
		models qwen
	}
}`, "cmd: ${MODEL_ID} is llama-swap's placeholder and nothing fills it in here: write {engine.name}", 3},
		{"Caddy's {port} in cmd", `llm_gateway {
	engine qwen {
		cmd llama-server --port {port}
		to http://127.0.0.1:{engine.port}
		models qwen
	}
}`, "cmd: {port} is the port of the request to Caddy, not the engine's: write {engine.port}", 3},
		{"the adapter's {http.request.port} in stop_cmd", `llm_gateway {
	engine qwen {
		cmd docker run --rm --name qwen -p {engine.port}:8080 qwen-image
		to http://127.0.0.1:{engine.port}
		models qwen
		stop_cmd docker stop qwen-{http.request.port}
	}
}`, "stop_cmd: {http.request.port} is the port of the request to Caddy", 6},
		{"a ${…} in defaults' to", `llm_gateway {
	defaults {
		to http://127.0.0.1:${PORT}
	}` + remote + `
}`, "to: ${PORT} is llama-swap's placeholder", 3},
		{"cmd without a program", `llm_gateway {
	engine llama {
		cmd
		to http://127.0.0.1:8080
		models llama
	}
}`, "wrong argument count", 3},
		{"api_key with three words", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		api_key sk-1 Authorization Bearer
	}
}`, "api_key takes a key and optionally the header", 5},
		{"a bad keepalive", `llm_gateway {
	keepalive often` + remote + `
}`, `bad keepalive "often"`, 2},
		{"retries not a number", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		retries many
	}
}`, `retries takes a count of 0 or more, not "many"`, 5},
		{"negative retries", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		retries -1
	}
}`, `retries takes a count of 0 or more, not "-1"`, 5},
		{"a breaker that never opens", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		breaker 0
	}
}`, `breaker takes a failure count of 1 or more, not "0"`, 5},
		{"a breaker with a bad cool-down", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		breaker 5 -30s
	}
}`, `bad breaker cool-down "-30s"`, 5},
		{"a breaker with three words", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		breaker 5 30s 1m
	}
}`, "breaker takes a failure count and optionally a cool-down", 5},
		{"a negative fallback_after", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		fallback_after -5s
	}
}`, "fallback_after may not be negative", 5},
		{"fallback to itself", `llm_gateway {
	engine openai {
		to https://api.openai.com
		models gpt-4o
		fallback openai
	}
}`, "engine openai: its fallback openai is the engine itself", 5},
		{"fallback to an unknown engine", `llm_gateway {` + remote + `
	engine local {
		cmd llama-server --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models llama
		fallback opanai
	}
}`, "engine local: its fallback opanai is not an engine of this handler", 10},
		{"fallbacks that chain", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		fallback b
	}
	engine b {
		to http://10.0.0.2:8000
		models b
		fallback c
	}
	engine c {
		to http://10.0.0.3:8000
		models c
	}
}`, "engine a: its fallback b has a fallback of its own (c); fallbacks do not chain", 2},
		{"context_fallback to an unknown engine", `llm_gateway {
	engine small {
		to http://10.0.0.1:8000
		models small
		context_fallback huge/gpt-4.1
	}
}`, "engine small: its context_fallback huge is not an engine of this handler", 5},
		{"context_fallback to itself", `llm_gateway {
	engine small {
		to http://10.0.0.1:8000
		models small small-long
		context_fallback small/small-long
	}
}`, "engine small: its context_fallback small is the engine itself", 5},
		{"no engines at all", `llm_gateway {
	keys sk-gateway-key-one
	max_body 1MiB
}`, "llm_gateway needs at least one engine block", 4},
		{"no block at all", `llm_gateway`, "llm_gateway needs at least one engine block", 1},
		{"keys without a token", `llm_gateway {
	keys` + remote + `
}`, "wrong argument count", 2},
		{"key with a name only", `llm_gateway {
	key alice` + remote + `
}`, "key takes a name and a token: key <name> <token>", 2},
		{"key with three words", `llm_gateway {
	key alice sk-alice extra` + remote + `
}`, "key takes a name and a token: key <name> <token>", 2},
		{"a transport other than http", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		transport fastcgi {
			root /srv
		}
	}
}`, "transport \"fastcgi\" is not supported: use transport http", 5},
		{"an option Caddy's transport does not know", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		transport http {
			dial_timeout 3s
			tls_no_such_option on
		}
	}
}`, "unrecognized subdirective tls_no_such_option", 7},
		{"a transport without its module", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		transport
	}
}`, "wrong argument count", 5},
		{"a transport set twice", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		transport http
		transport http {
			versions h2c
		}
	}
}`, "transport is set twice in this block (first at Testfile:5)", 6},
		{"health checks on an engine the gateway starts", `llm_gateway {
	engine a {
		to http://127.0.0.1:{engine.port}
		cmd llama-server --port {engine.port}
		models a
		health_interval 10s
	}
}`, "engine a: health checks are for remote engines", 2},
		{"health options without an interval", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		health_path /ping
	}
}`, "engine a: health checks need health_interval", 2},
		{"a health path that is no path", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		health_interval 10s
		health_path ping
	}
}`, "health_path takes a path starting with '/'", 6},
		{"a balance policy the gateway does not know", `llm_gateway {` + remote + `
	pool p {
		member openai
		balance random
	}
}`, "balance takes affinity, least_loaded or round_robin, not \"random\"", 8},
		{"a cache threshold over the whole prompt", `llm_gateway {` + remote + `
	pool p {
		member openai
		balance affinity {
			cache_threshold 1.5
		}
	}
}`, "cache_threshold takes a number from 0.01 to 1, not \"1.5\"", 9},
		{"an unknown balance option", `llm_gateway {` + remote + `
	pool p {
		member openai
		balance affinity {
			threshold 0.3
		}
	}
}`, "unknown balance subdirective \"threshold\" in balance affinity", 9},
		{"a relative threshold under 1", `llm_gateway {` + remote + `
	pool p {
		member openai
		balance least_loaded {
			balance_rel_threshold 0.5
		}
	}
}`, "balance_rel_threshold takes a number from 1 to 1000", 9},
		{"signals of a kind the gateway does not read", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		signals slots
	}
}`, "signals takes metrics or off, not \"slots\"", 5},
		{"a signals interval that is no duration", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		signals metrics
		signals_interval soon
	}
}`, "signals_interval", 6},
		{"zero health passes", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		health_interval 10s
		health_passes 0
	}
}`, "health_passes takes a count of 1 or more", 6},
		{"set with a value that is not JSON", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		set reasoning_effort low
	}
}`, "the value \"low\" is not JSON", 5},
		{"strip of the model", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		strip temperature Model
	}
}`, `"Model" is the gateway's to read`, 5},
		{"models in defaults", `llm_gateway {
	defaults {
		idle_timeout 1m
		models x
	}` + remote + `
}`, "models may not be in defaults", 4},
		{"an unknown option in defaults", `llm_gateway {
	defaults {
		idle_timeout 1m
		colour blue
	}` + remote + `
}`, `unknown engine subdirective "colour" in defaults`, 4},
		{"defaults twice", `llm_gateway {
	defaults {
	}
	defaults {
	}` + remote + `
}`, "defaults is given twice (first at Testfile:2)", 4},
		{"a default that breaks an engine", `llm_gateway {
	defaults {
		to http://127.0.0.1:{engine.port}
	}
	engine remote {
		models m
	}
}`, "{engine.port} needs 'cmd'", 5},
		{"a bad rate", `llm_gateway {
	key team team-key-0123456789 {
		rate 60/fortnight
	}` + remote + `
}`, "key team: rate:", 3},
		{"a bad over_budget", `llm_gateway {
	key team team-key-0123456789 {
		over_budget maybe
	}` + remote + `
}`, "over_budget takes refuse or fallback <model>", 3},
		{"a key's unknown model", `llm_gateway {
	key team team-key-0123456789 {
		models gpt-9
	}` + remote + `
}`, `key team: models: "gpt-9" is no model or pool`, 2},
		{"a store that is not redis", `llm_gateway {
	store memcached 127.0.0.1:11211` + remote + `
}`, "store takes redis <host:port>", 2},
		{"an extra path under /v1/", `llm_gateway {
	extra_paths /rerank /v1/rerank` + remote + `
}`, `"/v1/rerank" is under /v1/`, 2},
		{"stop_cmd without a program", `llm_gateway {
	engine a {
		cmd llama-server
		to http://127.0.0.1:{engine.port}
		models a
		stop_cmd
	}
}`, "stop_cmd takes a program and its arguments", 6},
		{"stop_cmd on a remote engine", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		stop_cmd docker stop a
	}
}`, "stop_cmd needs 'cmd'", 2},
		{"preload of a remote engine", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		preload
	}
}`, "preload needs 'cmd'", 2},
		{"preload that is neither on nor off", `llm_gateway {
	engine a {
		cmd llama-server
		to http://127.0.0.1:{engine.port}
		models a
		preload yes
	}
}`, "preload takes on or off", 6},
		{"two preloads in one group", `llm_gateway {
	engine a {
		cmd llama-server
		to http://127.0.0.1:{engine.port}
		models a
		group gpu0
		preload
	}
	engine b {
		cmd llama-server
		to http://127.0.0.1:{engine.port}
		models b
		group gpu0
		preload
	}
}`, "engines a and b of group gpu0 both preload", 9},
		{"max_concurrent zero", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		max_concurrent 0
	}
}`, "max_concurrent takes a count of 1 or more", 5},
		{"a queue without max_concurrent", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		queue 4
	}
}`, "queue needs max_concurrent", 2},
		{"a queue with a bad timeout", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		max_concurrent 2
		queue 4 soon
	}
}`, "bad queue timeout \"soon\"", 6},
		{"a queue with too many arguments", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		max_concurrent 2
		queue 4 30s 1m
	}
}`, "queue takes a length and optionally a timeout", 6},
		{"queue set twice", `llm_gateway {
	engine a {
		to http://10.0.0.1:8000
		models a
		max_concurrent 2
		queue 4
		queue 5
	}
}`, "queue is set twice in this block (first at Testfile:6)", 7},
		{"the handler's transport set twice", `llm_gateway {
	transport http
	transport http` + remote + `
}`, "transport is set twice in this block (first at Testfile:2)", 3},
		// device sets
		{"a device set's budget given twice", `llm_gateway {
	memory_budget 24GiB devices 1
	memory_budget 20GiB devices 1` + remote + `
}`, "memory_budget of devices 1 is given twice (first at Testfile:2)", 3},
		{"two sets share a device", `llm_gateway {
	memory_budget 24GiB devices 0,1
	memory_budget 20GiB devices 1,2` + remote + `
}`, "device 1 is in two memory_budget sets (0,1 and 1,2)", 3},
		{"memory_budget with a bad device", `llm_gateway {
	memory_budget 24GiB devices x` + remote + `
}`, `memory_budget: devices takes device ids such as 0 or 1,2, not "x"`, 2},
		{"memory_budget with devices but no ids", `llm_gateway {
	memory_budget 24GiB devices` + remote + `
}`, "memory_budget takes a size, and for a device set devices and their ids", 2},
		{"an engine on a set without a budget", `llm_gateway {
	memory_budget 24GiB devices 0
	engine a {
		cmd serve --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models a
		memory 12GiB
		devices 1
	}
}`, "engine a runs on devices 1, but no memory_budget names that set", 3},
		{"an engine that never fits its set", `llm_gateway {
	memory_budget 8GiB devices 1
	engine a {
		cmd serve --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models a
		memory 12GiB
		devices 1
	}
}`, "engine a needs memory 12 GiB, more than the memory_budget 8.0 GiB of devices 1: it could never start", 3},
		{"devices twice on an engine", `llm_gateway {
	memory_budget 8GiB devices 1
	engine a {
		devices 1
		devices 2
	}
}`, "devices is set twice in this block (first at Testfile:4)", 5},
		{"devices on a remote engine", `llm_gateway {
	memory_budget 8GiB devices 1
	engine a {
		to http://10.0.0.1:8000
		models a
		devices 1
	}
}`, "memory, min_loaded, evict and devices are for an engine the gateway starts", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser(tc.input))
			if err == nil {
				t.Fatalf("no error for\n%s", tc.input)
			}
			// the line closes the message, so "Testfile:1" cannot pass for "Testfile:12"
			at := fmt.Sprintf(", at Testfile:%d", tc.line)
			if !strings.Contains(err.Error(), tc.msg) || !strings.HasSuffix(err.Error(), at) {
				t.Errorf("got %q\nwant it to say %q and end with %q", err, tc.msg, at)
			}
		})
	}
}

// goldenSeparator splits a testdata/*.caddyfile into the llm_gateway block
// and the hconfig.Config it parses to, as JSON.
const goldenSeparator = "\n----------\n"

// TestParseGolden parses each testdata/*.caddyfile and compares the config
// with the JSON below its separator. With -update it rewrites that JSON.
func TestParseGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.caddyfile")
	}
	// keys made only of empty variables are refused at parse time; the
	// goldens keep the placeholders whatever the values
	t.Setenv("GATEWAY_KEYS", "k1")
	t.Setenv("CI_GATEWAY_KEY", "k2")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			content, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, wantJSON, ok := strings.Cut(string(content), goldenSeparator)
			if !ok && !*update {
				t.Fatalf("no %q line between the Caddyfile and its JSON", strings.TrimSpace(goldenSeparator))
			}
			m, err := ParseModule(cf.NewTestDispenser(input))
			if err != nil {
				t.Fatalf("%v\n%s", err, input)
			}
			var v any = m.Config
			got := append(asJSON(t, v), '\n')
			if *update {
				if err := os.WriteFile(file, []byte(input+goldenSeparator+string(got)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !bytes.Equal(got, []byte(wantJSON)) {
				t.Errorf("%s parses to\n%s\nwant\n%s\n(go test -update rewrites the golden file)", file, got, wantJSON)
			}
		})
	}
}

// An {env.*} the config cannot do without is checked where it is written:
// the error names the variable and the Caddyfile line.
func TestEmptyEnvironmentVariablesAreNamedWithTheirLine(t *testing.T) {
	t.Setenv("LLMGW_TEST_SET", "http://127.0.0.1:9")
	os.Unsetenv("LLMGW_TEST_UNSET")
	for _, tc := range []struct {
		name, input, want string
	}{
		{"to", "llm_gateway {\n engine a {\n to {env.LLMGW_TEST_UNSET}\n models m\n }\n}",
			"to: {env.LLMGW_TEST_UNSET} is empty: set LLMGW_TEST_UNSET in Caddy's environment, at Testfile:3"},
		{"cmd", "llm_gateway {\n engine a {\n cmd {env.LLMGW_TEST_UNSET} --port {engine.port}\n to http://127.0.0.1:{engine.port}\n models m\n }\n}",
			"{env.LLMGW_TEST_UNSET} is empty: set LLMGW_TEST_UNSET in Caddy's environment, at Testfile:3"},
		{"a named key among keys that resolve (issue 28)", "llm_gateway {\n keys sk-literal-key-0001\n key team {env.LLMGW_TEST_UNSET}\n engine a {\n to {env.LLMGW_TEST_SET}\n models m\n }\n}",
			"key team: {env.LLMGW_TEST_UNSET} is empty: set LLMGW_TEST_UNSET in Caddy's environment, at Testfile:3"},
		{"every key", "llm_gateway {\n max_body 1MiB\n keys {env.LLMGW_TEST_UNSET}\n key team {env.LLMGW_TEST_UNSET2}\n engine a {\n to {env.LLMGW_TEST_SET}\n models m\n }\n}",
			"the gateway's keys resolve to no token: {env.LLMGW_TEST_UNSET}, {env.LLMGW_TEST_UNSET2} are empty: set LLMGW_TEST_UNSET, LLMGW_TEST_UNSET2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(cf.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
			if !strings.Contains(err.Error(), "Testfile:") {
				t.Fatalf("no file:line in %v", err)
			}
		})
	}
	// one key that resolves is enough; so is a literal one
	ok := "llm_gateway {\n keys {env.LLMGW_TEST_UNSET} sk-literal-key-0001\n engine a {\n to {env.LLMGW_TEST_SET}\n models m\n }\n}"
	if _, err := Parse(cf.NewTestDispenser(ok)); err != nil {
		t.Fatal(err)
	}
}

// What a request waits for Redis is the operator's to
// choose, since a host's load alone can meet 100ms.
func TestParseStoreTimeout(t *testing.T) {
	cfg := parse(t, `llm_gateway {
	store redis 127.0.0.1:6379 {
		prefix gw
		timeout 250ms
	}`+remote+`
}`)
	want := hconfig.StoreConfig{Redis: "127.0.0.1:6379", Prefix: "gw", Timeout: dur(250 * time.Millisecond)}
	if cfg.Store == nil || *cfg.Store != want {
		t.Fatalf("store %+v, want %+v", cfg.Store, want)
	}
	if cfg := parse(t, "llm_gateway {\n\tstore redis 127.0.0.1:6379"+remote+"\n}"); cfg.Store.Timeout != 0 {
		t.Errorf("no timeout given: %v, want 0 (the quota store's default)", cfg.Store.Timeout)
	}
	for _, bad := range []string{"timeout", "timeout 100", "timeout soon", "timeout 1s 2s"} {
		input := "llm_gateway {\n\tstore redis 127.0.0.1:6379 {\n\t\t" + bad + "\n\t}" + remote + "\n}"
		if _, err := Parse(cf.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("%q: %v, want an error naming timeout", bad, err)
		}
	}
}

func TestParseUI(t *testing.T) {
	t.Setenv("LLMGW_TEST_UI_KEY", "a-status-page-key-1")
	cfg, ui, err := ParseWithUI(cf.NewTestDispenser(`llm_gateway {
	keys {env.LLMGW_TEST_UI_KEY}
	ui /llm {
		recent 500
	}` + remote + `
}`))
	if err != nil {
		t.Fatal(err)
	}
	if ui == nil || !reflect.DeepEqual(*ui, statuspage.Config{Path: "/llm", Recent: 500}) || len(cfg.Engines) != 1 {
		t.Fatalf("ui %+v, config %+v", ui, cfg)
	}
	if _, ui, _ = ParseWithUI(cf.NewTestDispenser(`llm_gateway {
	keys a-status-page-key-1
	ui /status` + remote + `
}`)); ui == nil || ui.Path != "/status" || ui.Recent != 0 {
		t.Fatalf("ui without a block: %+v", ui)
	}
	if _, ui, _ = ParseWithUI(cf.NewTestDispenser(`llm_gateway {` + remote + `
}`)); ui != nil {
		t.Fatalf("no ui directive, got %+v", ui)
	}
}

func TestParseUIErrors(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{"llm_gateway {\n\tui /llm" + remote + "\n}", "ui needs operator keys"},
		{"llm_gateway {\n\tkeys a-status-page-key-1\n\tui" + remote + "\n}", "ui needs a path"},
		{"llm_gateway {\n\tkeys a-status-page-key-1\n\tui /v1/ui" + remote + "\n}", "under /v1"},
		{"llm_gateway {\n\tkeys a-status-page-key-1\n\tui llm" + remote + "\n}", "want a path such as /llm"},
		{"llm_gateway {\n\tkeys a-status-page-key-1\n\tui /llm {\n\t\trecent 0\n\t}" + remote + "\n}", "recent takes a count"},
		{"llm_gateway {\n\tkeys a-status-page-key-1\n\tui /llm {\n\t\tcolour blue\n\t}" + remote + "\n}", `unknown ui subdirective "colour"`},
		{"llm_gateway {\n\tkeys a-status-page-key-1\n\tui /a\n\tui /b" + remote + "\n}", "ui is given twice"},
	} {
		_, _, err := ParseWithUI(cf.NewTestDispenser(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: got %v, want an error with %q and file:line", tc.input, err, tc.want)
		}
	}
}

// Every name the suggestions offer is one the parser knows, in the block
// whose list holds it: a suggestion is never a dead end.
func TestEveryListedSubdirectiveIsKnown(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		names []string
		block func(name string) string
	}{
		{"llm_gateway", handlerOptions, func(n string) string { return "llm_gateway {\n\t" + n + remote + "\n}" }},
		{"engine", engineOptions, func(n string) string { return "llm_gateway {\n\tengine e {\n\t\t" + n + "\n\t}\n}" }},
		{"pool", poolOptions, func(n string) string { return "llm_gateway {" + remote + "\n\tpool p {\n\t\t" + n + "\n\t}\n}" }},
		{"key", keyOptions, func(n string) string {
			return "llm_gateway {\n\tkey k sk-0123456789abcdef {\n\t\t" + n + "\n\t}" + remote + "\n}"
		}},
		{"team", teamOptions, func(n string) string {
			return "llm_gateway {\n\tteam t {\n\t\t" + n + "\n\t}" + remote + "\n}"
		}},
		{"store", storeOptions, func(n string) string {
			return "llm_gateway {\n\tstore redis 127.0.0.1:1 {\n\t\t" + n + "\n\t}" + remote + "\n}"
		}},
		{"identity", identityOptions, func(n string) string {
			return "llm_gateway {\n\tidentity {http.auth.user.id} {\n\t\t" + n + "\n\t}" + remote + "\n}"
		}},
		{"issued_keys", issuedOptions, func(n string) string {
			return "llm_gateway {\n\tissued_keys {\n\t\t" + n + "\n\t}" + remote + "\n}"
		}},
		{"budget_webhook", budgetWebhookOptions, func(n string) string {
			return "llm_gateway {\n\tbudget_webhook http://127.0.0.1:9/hook {\n\t\t" + n + "\n\t}" + remote + "\n}"
		}},
		{"ui", uiOptions, func(n string) string { return "llm_gateway {\n\tui /llm {\n\t\t" + n + "\n\t}" + remote + "\n}" }},
		{"history", historyOptions, func(n string) string { return "llm_gateway {\n\thistory {\n\t\t" + n + "\n\t}" + remote + "\n}" }},
		{"balance", balanceOptions, func(n string) string {
			return "llm_gateway {" + remote + "\n\tpool p {\n\t\tmember openai\n\t\tbalance affinity {\n\t\t\t" + n + "\n\t\t}\n\t}\n}"
		}},
	} {
		for _, name := range tc.names {
			_, err := Parse(cf.NewTestDispenser(tc.block(name)))
			if err != nil && strings.Contains(err.Error(), "unknown "+tc.kind+" subdirective") {
				t.Errorf("%s lists %s, which the parser does not know: %v", tc.kind, name, err)
			}
		}
	}
}

func TestPriorityGraceZeroTurnsItOffAndUnsetIsTheDefault(t *testing.T) {
	if cfg := parse(t, "llm_gateway {"+remote+"\n}"); cfg.PriorityGrace != nil || cfg.Grace() != engines.DefaultPriorityGrace {
		t.Fatalf("unset: %v, grace %v", cfg.PriorityGrace, cfg.Grace())
	}
	if cfg := parse(t, "llm_gateway {\n\tpriority_grace 0"+remote+"\n}"); cfg.PriorityGrace == nil || cfg.Grace() != 0 {
		t.Fatalf("priority_grace 0: %v, grace %v", cfg.PriorityGrace, cfg.Grace())
	}
	if cfg := parse(t, "llm_gateway {\n\tpriority_grace 2m"+remote+"\n}"); cfg.Grace() != 2*time.Minute {
		t.Fatalf("priority_grace 2m: grace %v", cfg.Grace())
	}
}

func TestParseTheDoorAndTheScheduler(t *testing.T) {
	local := `
	engine a {
		cmd serve --port {engine.port}
		to http://127.0.0.1:{engine.port}
		models a
		memory 12GiB
		min_loaded 2m
		evict never
	}`
	cfg := parse(t, `llm_gateway {
	memory_budget 24GiB
	max_wait 10s
	passthrough on {
		methods GET POST PUT
		budgets on
	}
	key team team-key-0123456789abc {
		models a
		reserve 2k
	}
	key ops ops-key-0123456789abcdef {
		operator
	}`+local+`
}`)
	e := cfg.Engines[0]
	if cfg.MemoryBudget != 24<<30 || time.Duration(cfg.MaxWait) != 10*time.Second || e.Memory != 12<<30 ||
		time.Duration(e.MinLoaded) != 2*time.Minute || e.Evict != "never" {
		t.Fatalf("scheduler: %+v %+v", cfg, e)
	}
	if !cfg.PassthroughBudgets || strings.Join(cfg.PassthroughMethods, " ") != "GET POST PUT" || cfg.Passthrough == nil || !*cfg.Passthrough {
		t.Fatalf("passthrough: %+v", cfg)
	}
	if cfg.Keys[0].Reserve != 2000 || !cfg.Keys[1].Operator {
		t.Fatalf("keys: %+v", cfg.Keys)
	}
	for input, want := range map[string]string{
		`llm_gateway {` + strings.Replace(local, "evict never", "evict sometimes", 1) + "\n}": "evict takes idle or never",
		`llm_gateway {` + strings.Replace(local, "memory 12GiB", "memory lots", 1) + "\n}":    "memory takes a size",
		`llm_gateway {` + local + "\n}":                                                                          "no memory_budget",
		"llm_gateway {\n\tmemory_budget 8GiB" + local + "\n}":                                                    "could never start",
		"llm_gateway {\n\tpassthrough on {\n\t\tmethods get\n\t}" + remote + "\n}":                               "not an HTTP method",
		"llm_gateway {\n\tkey t team-key-0123456789abc {\n\t\treserve x\n\t}" + remote + "\n}":                   "reserve takes a token count",
		"llm_gateway {\n\tkey t team-key-0123456789abc {\n\t\toperator\n\t\tmodels gpt-4o\n\t}" + remote + "\n}": "never an operator",
		"llm_gateway {\n\tkey a team-key-0123456789abc\n\tkey b team-key-0123456789abc" + remote + "\n}":         "given twice",
	} {
		if _, err := Parse(cf.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n%v, want %q", input, err, want)
		}
	}
}
