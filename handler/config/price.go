package config

import (
	"fmt"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// Price is a `price` line: what a model costs per million tokens, in US
// dollars, over the built-in table's price for it (or beside it, for a
// model the table does not know; a local engine's models cost nothing
// unless priced).
type Price struct {
	// Model names what is priced: ENGINE/MODEL (an engine and the model it
	// is sent), a model name of this gateway (a name in an engine's
	// models, or the model_name it is sent), or an engine (every model it
	// serves). The more specific wins. Required.
	Model string `json:"model"`

	// Input and Output are the prices of prompt and completion tokens, in
	// dollars per million tokens ("3", "0.075"). Required (0 is free).
	Input  price.Rate `json:"input"`
	Output price.Rate `json:"output"`

	// CacheRead and CacheWrite are the prices of prompt tokens read from
	// and written to the prompt cache. Default: the input price.
	CacheRead  *price.Rate `json:"cache_read,omitempty"`
	CacheWrite *price.Rate `json:"cache_write,omitempty"`

	// Reasoning is the price of the completion tokens the model reasoned
	// with, where a provider prices them apart. Default: the output price.
	Reasoning *price.Rate `json:"reasoning,omitempty"`
}

// Price is the line's price, every part set.
func (p Price) Price() price.Price {
	return price.Parts{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, Reasoning: p.Reasoning}.Complete()
}

// validatePrices refuses a price line that names nothing this gateway
// serves (a typo would price nothing), and a name priced twice.
func (c Config) validatePrices(byName map[string]engines.Config, models map[string]string) error {
	sent := map[string]bool{} // the names engines are sent
	for _, e := range c.Engines {
		if e.ModelName != "" {
			sent[e.ModelName] = true
		}
	}
	seen := map[string]bool{}
	for _, p := range c.Prices {
		err := func(format string, args ...any) error {
			return &ConfigError{Price: p.Model, Err: fmt.Errorf(format, args...)}
		}
		if seen[p.Model] {
			return err("price %s is given twice", p.Model)
		}
		seen[p.Model] = true
		for _, r := range []*price.Rate{&p.Input, &p.Output, p.CacheRead, p.CacheWrite, p.Reasoning} {
			if r != nil && (*r < 0 || *r > price.MaxRate) {
				return err("price %s: %s is no price per million tokens", p.Model, *r)
			}
		}
		engine, _, named := strings.Cut(p.Model, "/")
		_, isEngine := byName[p.Model]
		_, isModel := models[p.Model]
		switch {
		case p.Model == "":
			return err("a price names no model")
		case named && byName[engine].Name == "":
			return err("price %s: no engine %s here (price ENGINE/MODEL, a model or an engine)", p.Model, engine)
		case !named && !isEngine && !isModel && !sent[p.Model]:
			return err("price %s: no model, model_name or engine of this gateway is called %s", p.Model, p.Model)
		}
	}
	return nil
}
