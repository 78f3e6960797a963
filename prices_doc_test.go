package caddyllmgateway

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// engineBlock is an engine of a Caddyfile the manual prints: where it is,
// its provider (or its `to`), and the models it is sent.
type engineBlock struct {
	where, provider, to string
	models              []string
	modelName           string
}

// engineBlocks reads the engine blocks of a Caddyfile's lines: enough of
// the grammar for the manual's examples (one option a line, braces at line
// ends), not a parser.
func engineBlocks(where string, lines []string) []engineBlock {
	var out []engineBlock
	var cur *engineBlock
	depth := 0
	for _, line := range lines {
		f := strings.Fields(strings.SplitN(line, "#", 2)[0])
		if len(f) == 0 {
			continue
		}
		if cur == nil && len(f) == 3 && f[0] == "engine" && f[2] == "{" {
			cur, depth = &engineBlock{where: where + ": engine " + f[1]}, 1
			continue
		}
		if cur == nil {
			continue
		}
		switch {
		case f[len(f)-1] == "{":
			depth++
		case f[0] == "}":
			if depth--; depth == 0 {
				out = append(out, *cur)
				cur = nil
			}
		case depth == 1 && f[0] == "provider" && len(f) == 2:
			cur.provider = f[1]
		case depth == 1 && f[0] == "to" && len(f) == 2:
			cur.to = f[1]
		case depth == 1 && f[0] == "models":
			cur.models = f[1:]
		case depth == 1 && f[0] == "model_name" && len(f) == 2:
			cur.modelName = f[1]
		}
	}
	return out
}

// Every cloud provider's model the manual and the examples name (an engine
// with a provider, or whose `to` is a provider's API host) has a price in
// the built-in table: a reader who copies an example gets its cost counted.
func TestEveryProviderModelOfTheDocsHasABuiltinPrice(t *testing.T) {
	var blocks []engineBlock
	for _, page := range pages(t) {
		for _, f := range fences(t, page) {
			if f.lang == "caddyfile" {
				blocks = append(blocks, engineBlocks(page, f.lines)...)
			}
		}
	}
	examples, err := filepath.Glob("examples/*/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		b, err := os.ReadFile(ex)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, engineBlocks(ex, strings.Split(string(b), "\n"))...)
	}
	table := price.Builtin()
	checked := 0
	for _, b := range blocks {
		provider := b.provider
		if provider == "" {
			if u, err := url.Parse(b.to); err == nil {
				provider = table.ProviderOfHost(u.Hostname())
			}
		}
		if provider == "" {
			continue // a local engine, or a host the table does not price
		}
		sent := b.models
		if b.modelName != "" {
			sent = []string{b.modelName}
		}
		for _, m := range sent {
			if strings.Contains(m, "{") {
				continue // a placeholder
			}
			checked++
			if _, ok := table.Lookup(provider, m); !ok {
				t.Errorf("%s: %s's model %s has no price in internal/price/builtin.json", b.where, provider, m)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d provider models found in the docs and examples: the reader is broken", checked)
	}
}
