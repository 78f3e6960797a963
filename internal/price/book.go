package price

import (
	"net/url"
	"strings"
)

// A gateway's prices: the Caddyfile's price lines over the built-in table,
// for each engine and the model it is sent. Most specific first:
//
//	price ENGINE/MODEL …     the line for the engine and the model it is sent
//	price MODEL …            a line for the model it is sent, or a name of the engine's models sent as it
//	price ENGINE …           a line for every model of the engine
//	the built-in table       a cloud provider's engine (its provider, or a `to` on a provider's API host)
//	nothing                  a local engine: free; a cloud model the table lacks: free, and warned of at load

// Priced is a model's price and where it comes from.
type Priced struct {
	Price Price `json:"price"`
	// Origin is where the price comes from: OriginLine (a Caddyfile
	// line), OriginBuiltin (the built-in table), OriginLocal (a local
	// engine: free) or OriginUnpriced (a cloud provider's model the table
	// lacks: free).
	Origin string `json:"origin"`
	Line   string `json:"line,omitempty"`   // the price line's name, for OriginLine
	Date   string `json:"date,omitempty"`   // the table entry's, for OriginBuiltin
	Source string `json:"source,omitempty"` // the table entry's, for OriginBuiltin
}

// The origins of a price.
const (
	OriginLine     = "price"
	OriginBuiltin  = "builtin"
	OriginLocal    = "local"
	OriginUnpriced = "unpriced"
)

// Engine is what the book knows of an engine: its name, its provider (or
// its `to`, whose host may be a provider's API), the names of its models
// and the model_name it sends them as.
type Engine struct {
	Name, Provider, To string
	Models             []string
	ModelName          string
}

// Book is a gateway's prices. Its methods are safe for concurrent use (it
// is read only once made).
type Book struct {
	lines    map[string]Price
	table    *Table
	provider map[string]string              // engine → its provider, "" for a local engine
	names    map[string]map[string][]string // engine → a model it is sent → the names of its models line sent as it
}

// NewBook makes the book of a config's price lines (by the name each
// prices) and engines.
func NewBook(lines map[string]Price, engines []Engine) *Book {
	b := &Book{lines: lines, table: Builtin(), provider: map[string]string{}, names: map[string]map[string][]string{}}
	for _, e := range engines {
		b.provider[e.Name] = b.cloud(e)
		sent := map[string][]string{}
		if e.ModelName != "" {
			sent[e.ModelName] = []string{e.ModelName}
		}
		for _, m := range e.Models {
			s := m
			if e.ModelName != "" {
				s = e.ModelName
			}
			if m != s || len(sent[s]) == 0 {
				sent[s] = append(sent[s], m)
			}
		}
		b.names[e.Name] = sent
	}
	return b
}

// cloud is the provider an engine's answers are priced as: its provider,
// else the provider whose API host its `to` names; "" for a local engine.
func (b *Book) cloud(e Engine) string {
	if e.Provider != "" {
		return e.Provider
	}
	u, err := url.Parse(e.To)
	if err != nil {
		return ""
	}
	return b.table.ProviderOfHost(u.Hostname())
}

// Provider is the provider engine is priced as, "" for a local engine.
func (b *Book) Provider(engine string) string {
	if b == nil {
		return ""
	}
	return b.provider[templateOf(engine)]
}

// Of is the price of engine's answers for model (the model it was sent).
// A line naming a model applies to the engine that serves it under that
// name: an engine's fallback sent the model a client asked another engine
// for is priced as the fallback, not as that engine. A dynamic pool's
// member (TEMPLATE@ADDRESS) is priced as its template. A nil Book prices
// everything as a local engine's.
func (b *Book) Of(engine, model string) Priced {
	if b == nil {
		return Priced{Origin: OriginLocal}
	}
	engine = templateOf(engine)
	// the lines most specific first, looked up without building their
	// names (every answer is priced: this runs once per request)
	if len(b.lines) > 0 {
		if p, ok := b.lines[engine+"/"+model]; ok {
			return Priced{Price: p, Origin: OriginLine, Line: engine + "/" + model}
		}
		for _, m := range b.names[engine][model] {
			if p, ok := b.lines[m]; ok {
				return Priced{Price: p, Origin: OriginLine, Line: m}
			}
			if p, ok := b.lines[engine+"/"+m]; ok {
				return Priced{Price: p, Origin: OriginLine, Line: engine + "/" + m}
			}
		}
		if p, ok := b.lines[engine]; ok {
			return Priced{Price: p, Origin: OriginLine, Line: engine}
		}
	}
	prov := b.provider[engine]
	if prov == "" {
		return Priced{Origin: OriginLocal}
	}
	if e, ok := b.table.Lookup(prov, model); ok {
		return Priced{Price: e.Price, Origin: OriginBuiltin, Date: e.Date, Source: e.Source}
	}
	return Priced{Origin: OriginUnpriced}
}

// templateOf is a dynamic pool member's template (TEMPLATE@ADDRESS), else
// the engine itself.
func templateOf(engine string) string {
	if tmpl, _, ok := strings.Cut(engine, "@"); ok {
		return tmpl
	}
	return engine
}

// Most is the dearest price, part by part, of engine's answers for any
// model it is known to be sent (its model_name, each name of its models)
// and for the models given: what a request that may reach it reserves.
func (b *Book) Most(engine string, models ...string) Price {
	if b == nil {
		return Price{}
	}
	var most Price
	for m := range b.names[templateOf(engine)] {
		most = Max(most, b.Of(engine, m).Price)
	}
	for _, m := range models {
		most = Max(most, b.Of(engine, m).Price)
	}
	return most
}
