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
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "llm-probe",
		Usage: "[--config <path> [--adapter <name>]] [--address <admin>] [--pool <name>]",
		Short: "Sends a tiny completion through each pool member and prints a pass/fail table",
		Long: `
Probes the pools of llm_gateway: a tiny chat completion goes through each
member's own path (its engine, key and model) and a table of member, model,
status, latency and reason is printed. The exit status is 1 when any member
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

func cmdProbe(fl caddycmd.Flags) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var tables map[string][]handler.ProbeResult
	var err error
	if path := fl.String("config"); path != "" {
		tables, err = probeConfigFile(ctx, path, fl.String("adapter"), fl.String("pool"))
	} else {
		tables, err = probeAdmin(ctx, fl.String("address"), fl.String("pool"))
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if printProbe(os.Stdout, tables) {
		return caddy.ExitCodeSuccess, nil
	}
	return 1, nil
}

// printProbe prints the tables and reports whether every member passed.
func printProbe(w io.Writer, tables map[string][]handler.ProbeResult) bool {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tMEMBER\tMODEL\tSTATUS\tLATENCY\tRESULT\tREASON")
	ok := true
	for pool, results := range tables {
		for _, r := range results {
			verdict := "pass"
			if !r.Pass {
				verdict, ok = "FAIL", false
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", pool, r.Member, r.Model, r.Status,
				r.Latency.Round(time.Millisecond), verdict, oneLine(r.Reason))
		}
	}
	tw.Flush()
	return ok
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// probeAdmin asks a running Caddy to probe its pools.
func probeAdmin(ctx context.Context, addr, only string) (map[string][]handler.ProbeResult, error) {
	base := "http://" + strings.TrimPrefix(addr, "http://")
	var pools []handler.PoolStatus
	if err := getJSON(ctx, base+"/llm_gateway/pools", &pools, http.StatusOK); err != nil {
		return nil, err
	}
	tables := map[string][]handler.ProbeResult{}
	for _, p := range pools {
		if only != "" && p.Name != only {
			continue
		}
		var results []handler.ProbeResult
		if err := getJSON(ctx, base+"/llm_gateway/pools/"+p.Name+"/probe", &results, http.StatusOK, http.StatusServiceUnavailable); err != nil {
			return nil, err
		}
		tables[p.Name] = results
	}
	if only != "" && len(tables) == 0 {
		return nil, fmt.Errorf("the running config has no pool %q", only)
	}
	return tables, nil
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
// pools and stops whatever it started.
func probeConfigFile(ctx context.Context, path, adapter, only string) (map[string][]handler.ProbeResult, error) {
	cfgJSON, _, _, err := caddycmd.LoadConfig(path, adapter)
	if err != nil {
		return nil, err
	}
	var handlers []handler.Config
	collectGateways(cfgJSON, &handlers)
	if len(handlers) == 0 {
		return nil, errors.New("the config has no llm_gateway handler")
	}
	tables := map[string][]handler.ProbeResult{}
	repl := caddy.NewReplacer()
	for _, hc := range handlers {
		for i, ec := range hc.Engines {
			hc.Engines[i] = resolveEngine(repl, ec)
		}
		hc = hc.WithDefaults()
		if err := hc.Validate(); err != nil {
			return nil, err
		}
		var es []*engines.Engine
		for _, ec := range hc.Engines {
			e, err := engines.New(ec, &http.Transport{Proxy: http.ProxyFromEnvironment}, zap.NewNop())
			if err != nil {
				return nil, err
			}
			es = append(es, e)
		}
		g, err := handler.New(hc, es, zap.NewNop())
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
		for _, e := range es {
			_ = e.Destruct()
		}
		if err != nil {
			return nil, err
		}
	}
	if only != "" && len(tables) == 0 {
		return nil, fmt.Errorf("the config has no pool %q", only)
	}
	return tables, nil
}

// collectGateways finds every llm_gateway handler object in a config.
func collectGateways(raw []byte, out *[]handler.Config) {
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
