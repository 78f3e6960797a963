package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// Spend in money where an operator reads it (docs/observability.md): what
// each request cost (handler.Result.Cost, in nano-dollars) in the access
// log's {http.llm_gateway.cost_usd}, the request span's llm_gateway.cost_usd,
// the history record's cost_usd (summed by GET /llm_gateway/spend) and
// llm_gateway_cost_usd_total; each
// engine's prices in llm-probe and GET /llm_gateway/prices; and a warning
// at load (caddy validate too) for a cloud model without a price.

// costAttrs are the request span's cost attribute: a float, as spans carry
// numbers, converted once from the exact amount.
func costAttrs(res *handler.Result) []attribute.KeyValue {
	if res.Engine == "" && res.Cost == 0 {
		return nil
	}
	return []attribute.KeyValue{attribute.Float64("llm_gateway.cost_usd", res.Cost.Float())}
}

// costLabels are a cost series' labels: the engine that answered, the model
// asked for (as llm_gateway_tokens_total's), the key's name.
type costLabels struct{ engine, model, key string }

// costs are the cost counters, in whole nano-dollars: a float counter
// summing fractions of a cent drifts, an integer one does not. The
// collector converts each total to dollars once per scrape. Label sets are
// bounded by the config's engines, models and keys, as the other request
// metrics' are.
var costs sync.Map // costLabels → *atomic.Int64

var descCost = prometheus.NewDesc(metricsNS+"_cost_usd_total",
	"What requests cost in US dollars, at each model's price (Caddyfile price lines, else the built-in table of the cloud providers' prices; local engines free): the answer's usage with cached tokens at their price, and a hedge's losers. By the engine that answered, the model asked for and the key's name.",
	[]string{"engine", "model", "key"}, nil)

// costCollector reports the cost counters.
type costCollector struct{}

func (costCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descCost }

func (costCollector) Collect(ch chan<- prometheus.Metric) {
	costs.Range(func(k, v any) bool {
		l := k.(costLabels)
		ch <- prometheus.MustNewConstMetric(descCost, prometheus.CounterValue, price.Amount(v.(*atomic.Int64).Load()).Float(), l.engine, l.model, l.key)
		return true
	})
}

// observeCost counts a finished request's cost.
func observeCost(res *handler.Result, model string) {
	if res.Cost == 0 && res.Engine == "" {
		return
	}
	l := costLabels{res.Engine, model, res.KeyName}
	v, ok := costs.Load(l)
	if !ok {
		v, _ = costs.LoadOrStore(l, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(res.Cost))
}

// warnUnpriced logs, at load (and so in caddy validate), each cloud
// provider's model the config sends that has no price: its answers would
// be counted as free, and a money budget would not hold them.
func warnUnpriced(log *zap.Logger, gw *handler.Gateway) {
	for _, p := range gw.Prices() {
		if p.Origin == price.OriginUnpriced {
			log.Warn("a cloud model has no price: its answers count as free; give it one with a price line (price <engine>/<model> input <$/M> output <$/M>)",
				zap.String("engine", p.Engine), zap.String("provider", p.Provider), zap.String("model", p.Model))
		}
	}
}

// livePrices is every live engine's prices, each engine once, as the
// newest config prices it.
func livePrices() []handler.EnginePrice {
	out := []handler.EnginePrice{}
	seen := map[string]bool{}
	for _, g := range newestGateways() {
		engines := map[string]bool{}
		for _, p := range g.Prices() {
			if seen[p.Engine] {
				continue
			}
			engines[p.Engine] = true
			out = append(out, p)
		}
		for e := range engines {
			seen[e] = true
		}
	}
	return out
}

// printPrices prints each engine's models and their prices per million
// tokens, and where each price comes from.
func printPrices(w io.Writer, prices []handler.EnginePrice) {
	if len(prices) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nENGINE\tMODEL\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tREASONING\tPRICE ($ per million tokens)")
	for _, p := range prices {
		pr := p.Price
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Engine, p.Model, pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite, pr.Reasoning, origin(p))
	}
	tw.Flush()
}

// origin says where a price comes from, in a word or a line.
func origin(p handler.EnginePrice) string {
	switch p.Origin {
	case price.OriginLine:
		return "price " + p.Line
	case price.OriginBuiltin:
		return "built-in " + p.Provider + ", read " + p.Date + " from " + p.Source
	case price.OriginUnpriced:
		return "UNPRICED: " + p.Provider + " model not in the built-in table, counted as free"
	}
	return strings.ToUpper(p.Origin[:1]) + p.Origin[1:] + ": free"
}

// serveSpendAdmin is GET /llm_gateway/spend: the history's records in a
// window summed by key, model and engine (history.ParseSpendQuery).
func serveSpendAdmin(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path)}
	}
	st := newestHistory()
	if st == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("the request history is off in the running config (history off): spend is summed from it")}
	}
	q, err := history.ParseSpendQuery(r.URL.Query(), time.Now())
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	sp, err := st.Spend(q)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeAdminJSON(w, sp)
}
