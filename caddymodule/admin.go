package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI serves the gateway's part of Caddy's admin endpoint:
//
//	GET  /llm_gateway/engines               every engine: state, ready, pid, port, leases, idle time, last lines
//	GET  /llm_gateway/engines/<name>        one engine
//	POST /llm_gateway/engines/<name>/start  start it and wait until ready
//	POST /llm_gateway/engines/<name>/stop   stop it (?drain=true lets requests in flight finish)
//	POST /llm_gateway/engines/stop          stop every engine the gateway runs (?drain=true as above)
//	GET  /llm_gateway/pools                 every pool and its members' breaker state
//	GET  /llm_gateway/pools/<name>/probe    a tiny completion through each member: 200 if all pass, 503 if not
//	GET  /llm_gateway/prices                every engine's models and their prices, and where each comes from
//	     /llm_gateway/keys…                 named keys: usage, keys issued at run time (keysadmin.go)
//	GET  /llm_gateway/requests              the request history: ?model=&key=&engine=&status=&since=&before=&limit=; ?format=jsonl exports
//	GET  /llm_gateway/spend                 what requests cost, from the history, by key, model and engine: ?window=h|d|mo (default mo) or ?since=; ?by=; the history's filters
//	GET  /llm_gateway/ui/                   the status page (statuspage.Server), no key needed
//
// It never shows a key: engine statuses carry no credentials, and keys
// are named by their configured names.
type adminAPI struct{}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.llm_gateway",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Routes returns the admin routes.
func (adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/llm_gateway/", Handler: caddy.AdminHandlerFunc(serveAdmin)}}
}

func serveAdmin(w http.ResponseWriter, r *http.Request) error {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/llm_gateway/"), "/")
	parts := strings.Split(rest, "/")
	if parts[0] == "pools" {
		return servePoolsAdmin(w, r, parts[1:])
	}
	if parts[0] == "ui" {
		servePage(adminPage, w, r) // pageshutdown.go
		return nil
	}
	if parts[0] == "keys" {
		return serveKeysAdmin(w, r, parts[1:])
	}
	if parts[0] == "requests" && len(parts) == 1 {
		return serveRequestsAdmin(w, r)
	}
	if parts[0] == "spend" && len(parts) == 1 {
		return serveSpendAdmin(w, r) // spend.go
	}
	if parts[0] == "memory" && len(parts) == 1 && r.Method == http.MethodGet {
		return writeAdminJSON(w, schedulerReport())
	}
	if parts[0] == "prices" && len(parts) == 1 && r.Method == http.MethodGet {
		return writeAdminJSON(w, livePrices()) // spend.go
	}
	if parts[0] != "engines" {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("unknown llm_gateway admin path %s", r.URL.Path)}
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		return writeAdminJSON(w, allStatuses())
	case len(parts) == 2 && parts[1] == "stop" && r.Method == http.MethodPost:
		// every engine's stop (llama-swap's /unload), the page's stop-all:
		// each through the per-engine stop (liveSource.Act, engineAction)
		res := statuspage.StopAll(r.Context(), liveSource{}, r.URL.Query().Get("drain") == "true")
		return writeAdminJSONStatus(w, res.StatusCode(), res)
	case len(parts) == 2 && r.Method == http.MethodGet:
		e, err := adminEngine(parts[1])
		if err != nil && parts[1] == "stop" {
			break // the stop of every engine is a POST, as each engine's is: 405 below
		}
		if err != nil {
			return err
		}
		return writeAdminJSON(w, e.Status())
	case len(parts) == 3 && r.Method == http.MethodPost:
		e, err := adminEngine(parts[1])
		if err != nil {
			return err
		}
		if err := engineAction(r.Context(), e, parts[2], r.URL.Query().Get("drain") == "true"); err != nil {
			return err
		}
		return writeAdminJSON(w, e.Status())
	}
	return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path)}
}

func servePoolsAdmin(w http.ResponseWriter, r *http.Request, parts []string) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path)}
	}
	switch {
	case len(parts) == 0 || parts[0] == "":
		return writeAdminJSON(w, livePools())
	case len(parts) == 2 && parts[1] == "probe":
		g := gatewayWithPool(parts[0])
		if g == nil {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no pool named %q in the running config", parts[0])}
		}
		results, err := g.ProbePool(r.Context(), parts[0])
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
		}
		status := http.StatusOK
		if !allPass(results) {
			status = http.StatusServiceUnavailable
		}
		return writeAdminJSONStatus(w, status, results)
	}
	return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("unknown pools path %s", r.URL.Path)}
}

func allPass(results []handler.ProbeResult) bool {
	for _, r := range results {
		if !r.Pass {
			return false
		}
	}
	return true
}

func writeAdminJSON(w http.ResponseWriter, v any) error {
	return writeAdminJSONStatus(w, http.StatusOK, v)
}

func writeAdminJSONStatus(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// serveRequestsAdmin serves GET /llm_gateway/requests: the history, filtered
// and paged (history.ParseQuery), as JSON or, with ?format=jsonl or
// Accept: application/x-ndjson, as JSON lines (every record selected).
func serveRequestsAdmin(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path)}
	}
	st := newestHistory()
	if st == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("the request history is off in the running config (history off)")}
	}
	f, err := history.ParseQuery(r.URL.Query(), time.Now())
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	if history.WantsLines(r) {
		return st.WriteLines(w, f)
	}
	page, err := st.QueryPage(f)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeAdminJSON(w, page)
}

// Interface guards
var _ caddy.AdminRouter = (*adminAPI)(nil)
