package keystore

import (
	"sync"
	"sync/atomic"
	"time"
)

// activity is one key's use: what this front door counted since its last
// save (atomics, touched by every request of the key), and the totals the
// store answered then. It outlives the index's rebuilds: the core keeps
// one per name.
type activity struct {
	last     atomic.Int64 // unix ms of this front door's latest use
	requests atomic.Int64 // not yet saved
	tokens   atomic.Int64 // not yet saved

	mu     sync.Mutex
	total  Use   // as the store last answered
	flight Use   // taken for a save the store has not answered yet
	saved  int64 // the last use saved, unix ms
}

// seen counts a request that presented the key.
func (a *activity) seen(now time.Time) {
	a.requests.Add(1)
	ms := now.UnixMilli()
	for {
		old := a.last.Load()
		if ms <= old || a.last.CompareAndSwap(old, ms) {
			return
		}
	}
}

// take moves what was counted since the last save into a delta to save.
// Until the store answers (setTotal) or the save fails (giveBack), view
// counts the delta as in flight: a key's use never looks smaller while it
// is being saved.
func (a *activity) take() (Use, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := Use{Requests: a.requests.Swap(0), TokensUsed: a.tokens.Swap(0)}
	a.flight = Use{Requests: d.Requests, TokensUsed: d.TokensUsed}
	if last := a.last.Load(); last > a.saved {
		d.LastUsed = time.UnixMilli(last).UTC()
		a.saved = last
	}
	return d, d.Requests != 0 || d.TokensUsed != 0 || !d.LastUsed.IsZero()
}

// giveBack returns a delta whose save failed, for the next one.
func (a *activity) giveBack(d Use) {
	a.mu.Lock()
	a.requests.Add(d.Requests)
	a.tokens.Add(d.TokensUsed)
	a.flight, a.saved = Use{}, 0
	a.mu.Unlock()
}

// setTotal is the store's answer to a save: the totals, the delta in
// flight included.
func (a *activity) setTotal(u Use) {
	a.mu.Lock()
	a.total, a.flight = u, Use{}
	a.mu.Unlock()
}

// view is the totals with what was counted here since.
func (a *activity) view() Use {
	a.mu.Lock()
	u := a.total
	u.Requests += a.flight.Requests + a.requests.Load()
	u.TokensUsed += a.flight.TokensUsed + a.tokens.Load()
	a.mu.Unlock()
	if last := a.last.Load(); last > 0 && time.UnixMilli(last).After(u.LastUsed) {
		u.LastUsed = time.UnixMilli(last).UTC()
	}
	return u
}
