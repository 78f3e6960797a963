package api

import (
	"slices"
	"testing"
)

// Each API's own path is one of its routes, and the APIs a client speaks
// list theirs: a route missing here would be a 404 for every key.
func TestEachAPIListsItsRoutes(t *testing.T) {
	for _, a := range Clients {
		routes := Routes(a)
		if len(routes) == 0 {
			t.Errorf("%s lists no route", a)
		}
		if p := a.Path(); p != "" && !slices.Contains(routes, p) {
			t.Errorf("%s's path %s is not among its routes %v", a, p, routes)
		}
	}
	for _, p := range []string{"/v1/files", "/v1/batches", "/v1/fine_tuning/jobs", "/v1/assistants", "/v1/vector_stores", "/v1/messages/batches"} {
		if a, ok := RouteOf(p); ok {
			t.Errorf("%s is a route of %s: it belongs to a whole account, not a model", p, a)
		}
	}
	if got := Routes(Messages); !slices.Equal(got, []string{"/v1/messages", "/v1/messages/count_tokens"}) {
		t.Errorf("messages: %v", got)
	}
}
