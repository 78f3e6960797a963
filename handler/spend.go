package handler

import (
	"net/http"
	"sort"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// Spend in money (docs/keys.md): every model has a price (price.Book: the
// config's price lines over the built-in table), and every request what it
// cost. An answer costs its usage (api.Usage, read by its API's own rule, so the
// same whatever API the client spoke) at the price of the engine that
// answered and the model it was sent; an answer that reported no usage
// costs what it reserved, as its tokens are charged; the attempts that lost
// a hedge cost what they are charged in tokens, at their own prices. The
// hook is Gateway.charge (admission.go), which prices the request before
// it charges the key.

// priceOf is the price of rt's answers for model.
func (g *Gateway) priceOf(rt *route, model string) price.Price {
	return g.book.Of(rt.cfg.Name, model).Price
}

// newBook is the book of a config's prices.
func newBook(cfg config.Config) *price.Book {
	lines := map[string]price.Price{}
	for _, p := range cfg.Prices {
		lines[p.Model] = p.Price()
	}
	es := make([]price.Engine, len(cfg.Engines))
	for i, ec := range cfg.Engines {
		es[i] = price.Engine{Name: ec.Name, Provider: ec.ProviderName(), To: ec.To, Models: ec.Models, ModelName: ec.ModelName}
	}
	return price.NewBook(lines, es)
}

// EnginePrice is one model of an engine and its price, for llm-probe and
// the warnings at load.
type EnginePrice struct {
	Engine   string `json:"engine"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model"` // the model the engine is sent
	price.Priced
}

// Prices lists the price of every model each engine is sent (its
// model_name, else each name of its models, and the models pools send
// it), by engine and model.
func (g *Gateway) Prices() []EnginePrice {
	seen := map[[2]string]bool{}
	var out []EnginePrice
	add := func(rt *route, model string) {
		k := [2]string{rt.cfg.Name, model}
		if seen[k] {
			return
		}
		seen[k] = true
		out = append(out, EnginePrice{Engine: rt.cfg.Name, Provider: g.book.Provider(rt.cfg.Name), Model: model, Priced: g.book.Of(rt.cfg.Name, model)})
	}
	for _, rt := range g.routes {
		if rt.cfg.ModelName != "" {
			add(rt, rt.cfg.ModelName)
			continue
		}
		for _, m := range rt.cfg.Models {
			add(rt, m)
		}
	}
	for _, p := range g.poolList {
		for _, m := range p.cfg.Members {
			if name, model, ok := strings.Cut(m, "/"); ok && g.byName[name] != nil {
				add(g.byName[name], model)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Engine != out[j].Engine {
			return out[i].Engine < out[j].Engine
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// price fills in what the request cost: its answer's usage at the price of
// the engine that answered and the model it was sent, else, for an answer
// that reported none, what it reserved (r: its prompt at the input price,
// the rest at the output price); and the hedge's losers, priced as they
// lost (race.go). A request no engine answered costs its losers only.
func (g *Gateway) price(res *Result, r reservation) {
	res.Cost = res.HedgeCost
	if res.Engine == "" || res.op == opCountTokens {
		return // a count costs nothing (counttokens.go)
	}
	p := g.book.Of(res.Engine, res.ModelSent).Price
	switch {
	case res.HasUsage:
		res.Cost = price.Add(res.Cost, p.Cost(res.Usage))
	case res.Status >= 200 && res.Status < 300:
		res.Cost = price.Add(res.Cost, price.Add(price.Tokens(r.prompt, p.Input), price.Tokens(max(r.total-r.prompt, 0), p.Output)))
	}
}

// reservation is what a request reserves in tokens (keylimits.go): its
// prompt, and its whole estimate, prompt and most answer.
type reservation struct{ prompt, total int64 }

// chargeLoser adds to the request's cost what an attempt that lost a hedge
// costs, u, as its tokens are charged (loserUsage: what it reported, else
// its prompt as input), at its own price; nothing when it never held a
// lease.
func (g *Gateway) chargeLoser(res *Result, a *attempt, u api.Usage) {
	if a.leasedAt.IsZero() {
		return
	}
	res.HedgeCost = price.Add(res.HedgeCost, g.priceOf(a.c.rt, a.sent).Cost(u))
}

// CostHeader is the trailer that says what a request cost, in US dollars,
// with annotate_response on: the answer and a hedge's losers.
const CostHeader = "X-LLM-Cost"

// declareCostTrailer declares the cost trailer in an answer's headers
// before they are written, with annotate_response on: an answer of no
// declared length is then sent in chunks, whose end can carry it (Go's
// server would otherwise give a short answer a length, and no trailer).
func (g *Gateway) declareCostTrailer(h http.Header) {
	if g.annotate && h.Get("Content-Length") == "" {
		h.Add("Trailer", CostHeader)
	}
}

// annotateCost sets the cost trailer. The answer has been written by now:
// the value goes out after the body, where the response is sent in chunks
// (a stream, an annotated JSON answer) or over HTTP/2.
func (g *Gateway) annotateCost(w http.ResponseWriter, res *Result) {
	if !g.annotate || res.Engine == "" {
		return
	}
	w.Header().Set(http.TrailerPrefix+CostHeader, res.Cost.String())
}
