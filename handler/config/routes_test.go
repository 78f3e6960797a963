package config

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/providers/azure"
	"github.com/llmgateway/caddy-llm-gateway/providers/gemini"
)

func TestAPassthroughLineNamesRoutesAndPaths(t *testing.T) {
	t.Parallel()
	for _, items := range [][]string{
		{"countTokens", "generateContent", "/v1beta/files*", "/v1beta/cachedContents"},
		{"/*"},
		{"/v1beta/*"},
	} {
		e := engines.Config{Name: "g", Provider: new(gemini.Gemini), Passthrough: items}
		if err := checkPassthrough(e); err != nil {
			t.Errorf("%v: %v", items, err)
		}
	}
	for _, c := range []struct {
		item, path string
		match      bool
	}{
		{"/v1beta/files*", "/v1beta/files", true},
		{"/v1beta/files*", "/v1beta/files/abc", true},
		{"/v1beta/files", "/v1beta/files/abc", false},
		{"/v1beta/files", "/v1beta/files", true},
		{"/*", "/anything", true},
	} {
		if MatchesPath(c.item, c.path) != c.match {
			t.Errorf("%s %s: want %v", c.item, c.path, c.match)
		}
	}
	if !PassesNamedOnly(&engines.Config{Provider: new(azure.Azure)}) || !PassesNamedOnly(&engines.Config{APIs: []string{"converse"}}) || PassesNamedOnly(&engines.Config{}) {
		t.Error("PassesNamedOnly")
	}
}
