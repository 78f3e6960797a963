package caddymodule

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// scrape returns the value of every sample line of Caddy's metrics whose
// name and labels contain all of parts.
func scrape(t *testing.T) string {
	t.Helper()
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/metrics"))
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	return body
}

// sample is the value of the one sample matching name{labels}.
func sample(t *testing.T, metrics, name, labels string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(metrics, -1) {
		if m[1] == labels {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

func TestMetricsCountRequestsFallbacksStartsAndSurviveReloads(t *testing.T) {
	t.Setenv("LLMGW_TEST_METRIC_KEY", "metric-secret-key-1")
	t.Setenv("LLMGW_TEST_ENGINE_KEY", "metric-engine-key-2")
	fb := newRecorder(t, okChat)
	site := fmt.Sprintf(`
		key team-a {env.LLMGW_TEST_METRIC_KEY}
		engine local {
			`+engineCmd("--load-time 1500ms")+`
			models metric-local
			fallback cloud
			fallback_after 200ms
		}
		engine cloud {
			to %s
			api_key {env.LLMGW_TEST_ENGINE_KEY}
			models metric-cloud
		}`, fb.URL)
	logFile := startGateway(t, site)
	before := scrape(t)
	auth := []string{"Authorization", "Bearer metric-secret-key-1"}

	// a slow start: the first request falls back, the engine starts anyway
	resp, body := post(t, "/v1/chat/completions", `{"model":"metric-local"}`, auth...)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Fallback") != "cloud" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	awaitState(t, "local", "ready")
	for range 3 {
		if resp, body := post(t, "/v1/chat/completions", `{"model":"metric-local","stream":true,"stream_options":{"include_usage":true}}`, auth...); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	post(t, "/v1/chat/completions", `{"model":"made-up-model-name"}`, auth...)
	post(t, "/v1/chat/completions", `{"model":"metric-local"}`, "Authorization", "Bearer wrong-key-3")

	after := scrape(t)
	delta := func(name, labels string) float64 {
		return sample(t, after, name, labels) - sample(t, before, name, labels)
	}
	checks := []struct {
		name, labels string
		want         float64
	}{
		{"llm_gateway_requests_total", `engine="cloud",key="team-a",model="metric-local",status="200"`, 1},
		{"llm_gateway_requests_total", `engine="local",key="team-a",model="metric-local",status="200"`, 3},
		{"llm_gateway_requests_total", `engine="",key="team-a",model="",status="404"`, 1},
		{"llm_gateway_requests_total", `engine="",key="",model="",status="401"`, 1},
		{"llm_gateway_fallbacks_total", `engine="local",fallback="cloud",reason="slow_start"`, 1},
		{"llm_gateway_engine_starts_total", `engine="local",result="ok"`, 1},
		{"llm_gateway_engine_start_duration_seconds_count", `engine="local"`, 1},
		{"llm_gateway_time_to_first_byte_seconds_count", `engine="local"`, 3},
		{"llm_gateway_tokens_total", `engine="local",kind="completion",model="metric-local"`, 3 * 26},
	}
	for _, c := range checks {
		if got := delta(c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} went up by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := sample(t, after, "llm_gateway_engine_state", `engine="local",state="ready"`); got != 1 {
		t.Errorf("engine_state ready = %v", got)
	}
	for _, secret := range []string{"metric-secret-key-1", "metric-engine-key-2", "wrong-key-3", "made-up-model-name"} {
		if strings.Contains(after, secret) {
			t.Fatalf("%q appears in the metrics", secret)
		}
	}
	logs := readFile(t, logFile)
	for _, secret := range []string{"metric-secret-key-1", "metric-engine-key-2", "wrong-key-3"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("%q appears in the log", secret)
		}
	}

	// two reloads: no duplicate registration, and the counters go on
	startGateway(t, site)
	startGateway(t, site)
	if resp, body := post(t, "/v1/chat/completions", `{"model":"metric-local"}`, auth...); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	reloaded := scrape(t)
	l := `engine="local",key="team-a",model="metric-local",status="200"`
	if got, was := sample(t, reloaded, "llm_gateway_requests_total", l), sample(t, after, "llm_gateway_requests_total", l); got != was+1 {
		t.Fatalf("after two reloads the counter is %v, was %v", got, was)
	}
}
