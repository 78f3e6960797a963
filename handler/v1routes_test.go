package handler

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// A route an engine's routes line names reaches that engine only, for keys
// without rules: a pool's member that does not name it is skipped, however
// the pool orders its members, and a key with rules is refused before its
// body is read; a path nobody names is a 404 for every key.
func TestANamedRouteReachesOnlyTheEnginesThatNameIt(t *testing.T) {
	line := func(r *http.Request, _ []byte) string { return r.URL.Path }
	named, namedSeen := loggingUpstream(t, line, answerJSON(`{"id":"ftjob-1"}`))
	plain, plainSeen := loggingUpstream(t, line, answerJSON(`{"id":"ftjob-2"}`))
	_, gw := testGateway(t, config.Config{
		Keys: []config.Key{{Name: "team-a", Value: teamKey, Models: []string{"tuned", "both"}}, {Name: "ops", Value: opsKey}},
		Engines: []engines.Config{
			{Name: "plain", To: plain, Models: []string{"base"}},
			{Name: "named", To: named, Models: []string{"tuned"}, Routes: []string{"/v1/fine_tuning/*"}},
		},
		Pools: []config.PoolConfig{{Name: "both", Members: []string{"plain", "named"}}},
	}, nil)
	for _, c := range []struct {
		key, path, body string
		status          int
		code            string
	}{
		{teamKey, "/v1/fine_tuning/jobs", `{"model":"tuned"}`, 403, "route_not_allowed"},
		{teamKey, "/v1/fine_tuning/jobs", `not even JSON`, 403, "route_not_allowed"}, // before the body is read
		{opsKey, "/v1/fine_tuning/jobs", `{"model":"base"}`, 404, "route_not_found"},
		{opsKey, "/v1/files", `{"model":"tuned"}`, 404, "route_not_found"},
		{teamKey, "/v1/files", `{"model":"tuned"}`, 404, "route_not_found"},
	} {
		if st, out := call(t, gw, c.key, "POST", c.path, c.body); st != c.status || !strings.Contains(out, c.code) {
			t.Errorf("%s %s: %d %s, want %d %s", c.path, c.body, st, out, c.status, c.code)
		}
	}
	for _, user := range []string{"a", "b", "c", "d", "e", "f"} {
		if st, out := call(t, gw, opsKey, "POST", "/v1/fine_tuning/jobs", `{"model":"both","user":"`+user+`"}`); st != 200 {
			t.Fatalf("the pool, as %s: %d %s", user, st, out)
		}
	}
	if got := plainSeen(); len(got) != 0 {
		t.Fatalf("the member that does not name the route was sent %v", got)
	}
	if got := namedSeen(); len(got) != 6 || got[0] != "/v1/fine_tuning/jobs" {
		t.Fatalf("the member that names it was sent %v", got)
	}
}
