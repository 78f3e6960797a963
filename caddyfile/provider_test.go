package caddyfile

import (
	"strings"
	"testing"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	// the providers the tests name, as the caddy module builds them in
	_ "github.com/llmgateway/caddy-llm-gateway/providers/bedrock"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/gemini"
	_ "github.com/llmgateway/caddy-llm-gateway/providers/vertex"
)

// An engine's provider is its module's to read: `provider <name>` with an
// optional block, and the lines of its engine's block the module takes,
// before or after the provider line, written into the engine's "provider"
// object.
func TestAProviderReadsItsLineItsBlockAndItsEngineLines(t *testing.T) {
	for _, c := range []struct{ block, want string }{
		{"provider bedrock\n region us-east-1", `{"name":"bedrock","region":"us-east-1"}`},
		{"region us-east-1\n provider bedrock", `{"name":"bedrock","region":"us-east-1"}`},
		{"provider bedrock {\n region eu-west-1\n }", `{"name":"bedrock","region":"eu-west-1"}`},
		{"provider vertex {\n project p\n }\n location global", `{"location":"global","name":"vertex","project":"p"}`},
		{"provider gemini\n api_key k", `{"name":"gemini"}`},
	} {
		cfg := parse(t, "llm_gateway {\n engine e {\n "+c.block+"\n models m\n }\n}")
		e := cfg.Engines[0]
		if string(e.ProviderRaw) != c.want || e.Provider == nil {
			t.Errorf("%s:\n got %s\nwant %s", c.block, e.ProviderRaw, c.want)
		}
	}
}

// An engine that writes a provider's line beside the provider it takes
// from defaults gets a copy of that provider with its line; one that
// writes none shares the defaults'.
func TestAnEngineAddsItsLinesToTheProviderOfDefaults(t *testing.T) {
	cfg := parse(t, `llm_gateway {
	defaults {
		provider bedrock
		region us-east-1
	}
	engine east {
		models a
	}
	engine west {
		region us-west-2
		models b
	}
}`)
	if cfg.Engines[0].ProviderRaw != nil || string(cfg.Defaults.ProviderRaw) != `{"name":"bedrock","region":"us-east-1"}` {
		t.Errorf("east %s, defaults %s", cfg.Engines[0].ProviderRaw, cfg.Defaults.ProviderRaw)
	}
	if got := string(cfg.Engines[1].ProviderRaw); got != `{"name":"bedrock","region":"us-west-2"}` {
		t.Errorf("west %s", got)
	}
	if cfg.WithDefaults().Engines[0].To != "https://bedrock-runtime.us-east-1.amazonaws.com" {
		t.Errorf("east's to %s", cfg.WithDefaults().Engines[0].To)
	}
}

func TestProviderErrorsNameTheLine(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	for _, c := range []struct{ block, want string }{
		{"provider openrouter", `provider takes bedrock, gemini and vertex, not "openrouter", at Testfile:3`},
		{"provider", "provider takes the provider's name"},
		{"to http://127.0.0.1:1\n region us-east-1", "region is a line of a provider's engine, and engine e has no provider line (provider bedrock, gemini and vertex), at Testfile:4"},
		{"provider gemini\n region us-east-1", `region is no line of provider gemini's engine`},
		{"provider bedrock\n regoin us-east-1", `unknown engine subdirective "regoin" in engine e (did you mean region?)`},
		{"provider bedrock {\n project p\n }", `provider bedrock takes region, not "project"`},
		{"provider bedrock", "engine e: provider bedrock needs its region"},
		{"provider vertex\n project p", "needs its project and location"},
		{"provider bedrock\n region us-east-1\n cmd llama-server", "has no cmd"},
	} {
		_, err := Parse(cf.NewTestDispenser("llm_gateway {\n engine e {\n " + c.block + "\n models m\n }\n}"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %s", c.block, err, c.want)
		}
	}
	_, err := Parse(cf.NewTestDispenser("llm_gateway {\n defaults {\n region us-east-1\n }\n" + remote + "\n}"))
	if err == nil || !strings.Contains(err.Error(), "defaults has no provider line") {
		t.Errorf("defaults: %v", err)
	}
}
