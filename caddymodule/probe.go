package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "llm-probe",
		Usage: "[--config <path> [--adapter <name>]] [--address <admin>] [--pool <name>]",
		Short: "Sends a tiny completion through each pool member and prints a pass/fail table",
		Long: `
Probes the pools of llm_gateway: a tiny chat completion goes through each
member's own path (its engine, key and model) and a table of member, model,
status, latency and reason is printed, then each engine's models and their
prices per million tokens with where each comes from (a price line, the
built-in table, free). With --config, each engine with
prefill on is also asked to continue an assistant message (the "(prefill)"
table): an engine that answers it anew fails, since resumes rely on it; and
each engine of a cloud provider is sent a one-token completion (the
"(providers)" table): its credentials and model are checked. The exit status is 1 when any member
fails, so the command can gate a deploy.

With --config, the Caddyfile (or JSON) is loaded here, without serving it:
a deploy can probe a config before it goes live. Without it, the running
Caddy's admin API (--address, default localhost:2019) probes its live pools.
--pool limits the probe to one pool.`,
		Flags: func() *flag.FlagSet {
			fs := flag.NewFlagSet("llm-probe", flag.ExitOnError)
			fs.String("config", "", "configuration file to load and probe")
			fs.String("adapter", "", "name of the config adapter (default: caddyfile for a Caddyfile)")
			fs.String("address", "localhost:2019", "admin address of a running Caddy to probe")
			fs.String("pool", "", "probe only this pool")
			return fs
		}(),
		Func: cmdProbe,
	})
}

// PrefillTable is the probe's table of the engines with prefill on;
// ProvidersTable of the engines of a cloud provider.
const (
	PrefillTable   = "(prefill)"
	ProvidersTable = "(providers)"
)

func cmdProbe(fl caddycmd.Flags) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var tables map[string][]handler.ProbeResult
	var prices []handler.EnginePrice
	var err error
	if path := fl.String("config"); path != "" {
		tables, prices, err = probeConfigFile(ctx, path, fl.String("adapter"), fl.String("pool"))
	} else {
		tables, prices, err = probeAdmin(ctx, fl.String("address"), fl.String("pool"))
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	failed, total := printProbe(os.Stdout, tables)
	printPrices(os.Stdout, prices) // spend.go
	if failed > 0 {
		// Caddy's command runner exits 0 for a status of 1 without an
		// error: the error is what makes the exit status 1
		return 1, fmt.Errorf("%d of %d pool members failed the probe", failed, total)
	}
	return caddy.ExitCodeSuccess, nil
}

// printProbe prints the tables and counts the members that failed.
func printProbe(w io.Writer, tables map[string][]handler.ProbeResult) (failed, total int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tMEMBER\tMODEL\tSTATUS\tLATENCY\tRESULT\tREASON")
	for pool, results := range tables {
		for _, r := range results {
			total++
			verdict := "pass"
			if !r.Pass {
				verdict = "FAIL"
				failed++
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", pool, r.Member, r.Model, r.Status,
				r.Latency.Round(time.Millisecond), verdict, oneLine(r.Reason))
		}
	}
	tw.Flush()
	return failed, total
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// probeAdmin asks a running Caddy to probe its pools, and for its prices.
func probeAdmin(ctx context.Context, addr, only string) (map[string][]handler.ProbeResult, []handler.EnginePrice, error) {
	base := "http://" + strings.TrimPrefix(addr, "http://")
	var pools []handler.PoolStatus
	if err := getJSON(ctx, base+"/llm_gateway/pools", &pools, http.StatusOK); err != nil {
		return nil, nil, err
	}
	tables := map[string][]handler.ProbeResult{}
	for _, p := range pools {
		if only != "" && p.Name != only {
			continue
		}
		var results []handler.ProbeResult
		if err := getJSON(ctx, base+"/llm_gateway/pools/"+p.Name+"/probe", &results, http.StatusOK, http.StatusServiceUnavailable); err != nil {
			return nil, nil, err
		}
		tables[p.Name] = results
	}
	if only != "" && len(tables) == 0 {
		return nil, nil, fmt.Errorf("the running config has no pool %q", only)
	}
	var prices []handler.EnginePrice
	if only == "" {
		if err := getJSON(ctx, base+"/llm_gateway/prices", &prices, http.StatusOK); err != nil {
			return nil, nil, err
		}
	}
	return tables, prices, nil
}

func getJSON(ctx context.Context, url string, v any, okStatus ...int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking the admin API: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, s := range okStatus {
		if resp.StatusCode == s {
			return json.Unmarshal(body, v)
		}
	}
	return fmt.Errorf("%s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
}

// probeConfigFile loads a config's llm_gateway handlers here, probes their
// pools, lists their prices and stops whatever it started.
func probeConfigFile(ctx context.Context, path, adapter, only string) (map[string][]handler.ProbeResult, []handler.EnginePrice, error) {
	cfgJSON, _, _, err := caddycmd.LoadConfig(path, adapter)
	if err != nil {
		return nil, nil, err
	}
	var handlers []hconfig.Config
	collectGateways(cfgJSON, &handlers)
	if len(handlers) == 0 {
		return nil, nil, errors.New("the config has no llm_gateway handler")
	}
	tables := map[string][]handler.ProbeResult{}
	var prices []handler.EnginePrice
	repl := caddy.NewReplacer()
	cctx, cancel := caddy.NewContext(caddy.Context{Context: ctx})
	defer cancel()
	for _, hc := range handlers {
		// the engines get the transports production gives them (issue
		// 16: a plain http.Transport let the deploy gate pass an engine
		// behind an internal CA that the live config could not reach)
		var es []*engines.Engine
		var ts []*reverseproxy.HTTPTransport
		g, _, err := buildGateway(cctx, repl, hc, zap.NewNop(), func(ec engines.Config) (*engines.Engine, error) {
			e, t, err := probeEngine(cctx, ec)
			if err != nil {
				return nil, err
			}
			es, ts = append(es, e), append(ts, t)
			return e, nil
		})
		if err == nil {
			for _, name := range g.PoolNames() {
				if only != "" && name != only {
					continue
				}
				tables[name], err = g.ProbePool(ctx, name)
				if err != nil {
					break
				}
			}
		}
		if err == nil && only == "" {
			// each engine's `prefill on` claim, which resumes rely on
			if rs := g.ProbePrefill(ctx); len(rs) > 0 {
				tables[PrefillTable] = append(tables[PrefillTable], rs...)
			}
			// each cloud provider's credentials and model
			if rs := g.ProbeProviders(ctx); len(rs) > 0 {
				tables[ProvidersTable] = append(tables[ProvidersTable], rs...)
			}
			prices = append(prices, g.Prices()...)
		}
		for i, e := range es {
			_ = e.Destruct()
			_ = ts[i].Cleanup()
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if only != "" && len(tables) == 0 {
		return nil, nil, fmt.Errorf("the config has no pool %q", only)
	}
	return tables, prices, nil
}

// probeEngine makes an engine for the probe with the transport loadEngine
// gives it in production. The caller destructs the engine, then cleans the
// transport up.
func probeEngine(ctx caddy.Context, ec engines.Config) (*engines.Engine, *reverseproxy.HTTPTransport, error) {
	t, err := newTransport(ctx, ec)
	if err != nil {
		return nil, nil, err
	}
	e, err := engines.New(ec, t, zap.NewNop())
	if err != nil {
		_ = t.Cleanup()
		return nil, nil, err
	}
	return e, t, nil
}

// collectGateways finds every llm_gateway handler object in a config.
func collectGateways(raw []byte, out *[]hconfig.Config) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			if t["handler"] == "llm_gateway" {
				b, _ := json.Marshal(t)
				var g Gateway
				if json.Unmarshal(b, &g) == nil {
					*out = append(*out, g.Config)
				}
				return
			}
			for _, y := range t {
				walk(y)
			}
		case []any:
			for _, y := range t {
				walk(y)
			}
		}
	}
	walk(v)
}
