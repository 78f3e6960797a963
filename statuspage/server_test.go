package statuspage

import (
	"net/http/httptest"
	"testing"
	"time"
)

// TestTheAdminPageOpensItsStreamsWhenOperatorsHoldTheRest:
// operators' pages on sites may hold every stream they are allowed, 56 of
// the 64; the admin endpoint's page still opens its own, up to the 8 kept in
// reserve for it.
func TestTheAdminPageOpensItsStreamsWhenOperatorsHoldTheRest(t *testing.T) {
	if maxStreams != 64 || adminReserve != 8 {
		t.Fatalf("the cap is %d streams, %d of them in reserve: the comment and the docs say 64 and 8", maxStreams, adminReserve)
	}
	waitForNoStreams(t) // an earlier test's streams end when their server notices
	site, _ := newTestServer(t, &fakeSource{}, NewKeys([]string{"operator-token"}))
	admin := httptest.NewServer(&Server{Prefix: "/llm", Board: NewBoard(50), Source: &fakeSource{}, Admin: true})
	t.Cleanup(admin.Close)

	for i := range maxStreams - adminReserve {
		if resp := get(t, site, "/llm/api/events", "operator-token"); resp.StatusCode != 200 {
			t.Fatalf("the site's stream %d: %d", i+1, resp.StatusCode)
		}
	}
	if resp := get(t, site, "/llm/api/events", "operator-token"); resp.StatusCode != 503 {
		t.Fatalf("a site's page opened a stream of the admin endpoint's reserve: %d", resp.StatusCode)
	}
	for i := range adminReserve {
		if resp := get(t, admin, "/llm/api/events", ""); resp.StatusCode != 200 {
			t.Fatalf("the admin endpoint's stream %d, with the sites' streams all taken: %d", i+1, resp.StatusCode)
		}
	}
	if resp := get(t, admin, "/llm/api/events", ""); resp.StatusCode != 503 {
		t.Fatalf("a stream past the cap of %d: %d", maxStreams, resp.StatusCode)
	}
}

func waitForNoStreams(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // an upper bound only
	for openStreams.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open", openStreams.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
