package caddyfile

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// An engine's `provider <name> [{ … }]` line is its provider module's to
// read, as reverse_proxy hands `transport <name> { … }` to its transport's
// module: this package knows no provider by name. The modules registered in
// the providers' namespace are the names the line takes.
//
// A provider may also take lines of its engine's block itself, beside its
// own block: `region us-east-1` beside `provider bedrock` reads as
// `provider bedrock { region us-east-1 }`. Such a module implements
// EngineLiner; the engine's block keeps each line it does not know and that
// some provider takes, and offers it to its provider once the block is read
// (the lines may come before the `provider` line), or to the provider it
// inherits from `defaults`.

// An EngineLiner is a provider module that takes lines of its engine's
// block beside its own block.
type EngineLiner interface {
	// EngineLines are the names of the lines it takes.
	EngineLines() []string
	// UnmarshalEngineLine reads one of them: d is at the line's name,
	// d.Val(), as it would be inside the module's own block.
	UnmarshalEngineLine(d *cf.Dispenser) error
}

// providerModules are the provider modules built in, by name.
func providerModules() map[string]caddy.ModuleInfo {
	mods := map[string]caddy.ModuleInfo{}
	for _, m := range caddy.GetModules(providers.Namespace) {
		mods[m.ID.Name()] = m
	}
	return mods
}

// providerNames lists the names `provider` takes, for its error: "a, b and
// c".
func providerNames() string {
	var names []string
	for name := range providerModules() {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// providerLines are the lines of an engine's block that some provider
// takes, beside its own block.
func providerLines() []string {
	var lines []string
	for _, m := range providerModules() {
		if l, ok := m.New().(EngineLiner); ok {
			for _, name := range l.EngineLines() {
				if !slices.Contains(lines, name) {
					lines = append(lines, name)
				}
			}
		}
	}
	slices.Sort(lines)
	return lines
}

// parseProvider parses `provider <name> [{ … }]` with its module.
func parseProvider(d *cf.Dispenser) (providers.Provider, error) {
	if !d.NextArg() {
		return nil, d.Errf("provider takes the provider's name: %s", providerNames())
	}
	name := d.Val()
	if _, ok := providerModules()[name]; !ok {
		return nil, d.Errf("provider takes %s, not %q", providerNames(), name)
	}
	mod, err := cf.UnmarshalModule(d, providers.Namespace+"."+name)
	if err != nil {
		return nil, err
	}
	p, ok := mod.(providers.Provider)
	if !ok {
		return nil, d.Errf("module %s.%s is no provider (%T)", providers.Namespace, name, mod)
	}
	return p, nil
}

// offerLines gives an engine's provider the lines of its block it kept
// (each a segment: the line and its block), and writes the provider's JSON
// into the engine's config.
func offerLines(ec *engines.Config, lines []cf.Segment) error {
	for _, seg := range lines {
		d := cf.NewDispenser(seg)
		d.Next()
		l, ok := ec.Provider.(EngineLiner)
		if !ok || !slices.Contains(l.EngineLines(), d.Val()) {
			return d.Errf("%s is no line of provider %s's engine: write it in an engine of a provider that takes it", d.Val(), ec.ProviderName())
		}
		if err := l.UnmarshalEngineLine(d); err != nil {
			return err
		}
	}
	ec.ProviderRaw = caddyconfig.JSONModuleObject(ec.Provider, "name", caddy.GetModuleName(ec.Provider), nil)
	return nil
}

// noProvider is the error of a block (where) with lines of a provider's
// engine and no provider to take them.
func noProvider(lines []cf.Segment, where string) error {
	d := cf.NewDispenser(lines[0])
	d.Next()
	return d.Errf("%s is a line of a provider's engine, and %s has no provider line (provider %s)", d.Val(), where, providerNames())
}

// inheritProvider gives an engine with provider lines of its own and no
// `provider` line a copy of the provider of defaults, with its lines: the
// lines an engine writes beside the provider it inherits are its own.
func inheritProvider(ec *engines.Config, defaults *engines.Config, lines []cf.Segment) error {
	if defaults == nil || defaults.Provider == nil {
		return noProvider(lines, "engine "+ec.Name)
	}
	name := caddy.GetModuleName(defaults.Provider)
	mod := providerModules()[name].New()
	// the defaults' JSON is this package's own, just written: its "name"
	// member is the only one the module does not have
	if err := json.Unmarshal(defaults.ProviderRaw, mod); err != nil {
		return err
	}
	ec.Provider = mod.(providers.Provider)
	return offerLines(ec, lines)
}
