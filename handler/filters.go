package handler

import (
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// filtersOf parses an engine's filters; the config was validated, so every
// path is well formed and every value is JSON.
func filtersOf(cfg engines.Config) []jsonmember.Filter {
	var fs []jsonmember.Filter
	for _, p := range cfg.Strip {
		fs = append(fs, jsonmember.Filter{Path: strings.Split(p, ".")})
	}
	for _, s := range cfg.Set {
		fs = append(fs, jsonmember.Filter{Path: strings.Split(s.Path, "."), Value: []byte(s.Value)})
	}
	return fs
}
