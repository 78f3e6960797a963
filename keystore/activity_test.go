package keystore

import (
	"testing"
	"time"
)

// A key's use never looks smaller while a save of it is in flight: the
// delta taken counts until the store answers with totals that hold it, or
// comes back when the save fails. (A Get between a save's take and its
// answer showed 0 requests under load.)
func TestActivityCountsWhatASaveHasInFlight(t *testing.T) {
	var a activity
	now := time.Unix(1_700_000_000, 0)
	for range 3 {
		a.seen(now)
	}
	a.tokens.Add(120)
	want := func(step string, req, tok int64) {
		t.Helper()
		if u := a.view(); u.Requests != req || u.TokensUsed != tok {
			t.Fatalf("%s: %+v, want %d requests, %d tokens", step, u, req, tok)
		}
	}
	d, ok := a.take()
	if !ok || d.Requests != 3 || d.TokensUsed != 120 {
		t.Fatalf("take: %+v %v", d, ok)
	}
	want("in flight", 3, 120)
	a.seen(now)
	want("in flight, one more", 4, 120)
	a.giveBack(d)
	want("the save failed", 4, 120)
	d, _ = a.take()
	want("in flight again", 4, 120)
	a.setTotal(Use{Requests: d.Requests, TokensUsed: d.TokensUsed})
	want("saved", 4, 120)
}
