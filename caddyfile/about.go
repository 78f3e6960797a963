package caddyfile

import (
	"encoding/json"
	"strings"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// parseAbout parses an engine's words for people (llama-swap's name,
// description and metadata):
//
//	display_name <text…>       # "Qwen3 30B A3B"
//	description <text…>
//	metadata <name> <value>    # repeatable; a JSON value (32768, true, ["a"]) or else text
func parseAbout(d *cf.Dispenser, ec *engines.Config) error {
	if ec.About == nil {
		ec.About = &engines.About{}
	}
	sub := d.Val()
	args := d.RemainingArgs()
	switch sub {
	case "display_name", "description":
		if len(args) == 0 {
			return d.Errf("%s takes text: %s \"Qwen3 30B A3B\"", sub, sub)
		}
		text := strings.Join(args, " ")
		if sub == "display_name" {
			ec.About.DisplayName = text
		} else {
			ec.About.Description = text
		}
		return nil
	}
	if len(args) != 2 {
		return d.Errf("metadata takes a name and a value: metadata context 32768, metadata vendor Qwen (one per line)")
	}
	if _, ok := ec.About.Metadata[args[0]]; ok {
		return d.Errf("metadata %s is given twice in this block", args[0])
	}
	value := json.RawMessage(args[1])
	if !json.Valid(value) {
		value, _ = json.Marshal(args[1]) // text
	}
	if ec.About.Metadata == nil {
		ec.About.Metadata = map[string]json.RawMessage{}
	}
	ec.About.Metadata[args[0]] = value
	return nil
}
