package caddyfile

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// envPlaceholder is Caddy's runtime environment placeholder, {env.NAME}.
var envPlaceholder = regexp.MustCompile(`\{env\.([^{}]+)\}`)

// EmptyEnv returns the variables of the {env.NAME} placeholders in values
// that are unset or empty, each once, in order.
func EmptyEnv(values ...string) []string {
	var names []string
	seen := map[string]bool{}
	for _, v := range values {
		for _, m := range envPlaceholder.FindAllStringSubmatch(v, -1) {
			if name := m[1]; os.Getenv(name) == "" && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names
}

// requireEnv refuses, at the directive's file:line, a value whose {env.*}
// placeholders name empty variables where an empty value cannot work (an
// engine's address or program): the error names the variables to set.
// Caddy resolves {env.*} when the config loads, in the same
// environment that `caddy run` parses the Caddyfile in.
func requireEnv(d *cf.Dispenser, directive string, values ...string) error {
	names := EmptyEnv(values...)
	if len(names) == 0 {
		return nil
	}
	return d.Errf("%s: %s", directive, describeEmpty(names))
}

// checkValues checks, at the directive's file:line, the values of an option
// that takes {engine.port}: no empty variable (requireEnv), and no
// placeholder of another tool that nothing fills in (llama-swap's ${PORT},
// the request's {port}), which engines' Validate refuses too, but only
// with the engine block's line.
func checkValues(d *cf.Dispenser, directive string, values ...string) error {
	if err := requireEnv(d, directive, values...); err != nil {
		return err
	}
	if err := engines.CheckPlaceholders(directive, values...); err != nil {
		return d.Errf("%v", err)
	}
	return nil
}

// describeEmpty says which variables are empty and what to do.
func describeEmpty(names []string) string {
	ph := make([]string, len(names))
	for i, n := range names {
		ph[i] = "{env." + n + "}"
	}
	verb := "is"
	if len(names) > 1 {
		verb = "are"
	}
	return fmt.Sprintf("%s %s empty: set %s in Caddy's environment", strings.Join(ph, ", "), verb, strings.Join(names, ", "))
}
