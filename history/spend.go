package history

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// Spend over a window: the history's records summed by key, model and
// engine (GET /llm_gateway/spend). It answers "what did each key spend on
// which model this month" from the records the history still holds: a
// window that began before the history's max_age is partial, and the
// answer says from when it counts (keep bounds it too: the newest keep
// requests are all it holds).

// SpendQuery is what to sum: the records a Filter selects (its Limit and
// Before aside), grouped by some of key, model, engine and day.
type SpendQuery struct {
	Filter Filter
	By     []string // of "key", "model", "engine", "day"; default the first three
}

// The groupings a SpendQuery may name: day is the UTC day a request
// arrived, as a budget's d window counts it (the status page's spend
// charts group by it).
var (
	spendGroups   = []string{"key", "model", "engine"}
	spendGroupsBy = []string{"key", "model", "engine", "day"}
)

// ParseSpendQuery reads a SpendQuery from a query string: ParseQuery's
// filters (model= key= engine= status= api= since=), and
//
//	window= h, d or mo: since the current hour, day or month began (UTC),
//	        as a budget's window; default mo, unless since= is given
//	by=     key,model,engine,day or some of them: the grouping (default
//	        key,model,engine; day is the request's UTC day)
func ParseSpendQuery(q url.Values, now time.Time) (SpendQuery, error) {
	f, err := ParseQuery(q, now)
	if err != nil {
		return SpendQuery{}, err
	}
	f.Before, f.Limit = 0, 0
	w := q.Get("window")
	switch {
	case w != "" && q.Get("since") != "":
		return SpendQuery{}, fmt.Errorf("window %q and since %q: give one", w, q.Get("since"))
	case w == "" && q.Get("since") == "":
		w = "mo"
	}
	if w != "" {
		start, ok := windowStart(w, now.UTC())
		if !ok {
			return SpendQuery{}, fmt.Errorf("window %q: want h, d or mo", w)
		}
		f.Since = start.UnixMilli()
	}
	sq := SpendQuery{Filter: f, By: spendGroups}
	if by := q.Get("by"); by != "" {
		sq.By = nil
		for _, g := range strings.Split(by, ",") {
			if !slices.Contains(spendGroupsBy, g) || slices.Contains(sq.By, g) {
				return SpendQuery{}, fmt.Errorf("by %q: want some of key, model, engine and day, each once", by)
			}
			sq.By = append(sq.By, g)
		}
	}
	return sq, nil
}

// windowStart is when the current window of w began.
func windowStart(w string, now time.Time) (time.Time, bool) {
	switch w {
	case "h":
		return now.Truncate(time.Hour), true
	case "d":
		return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC), true
	case "mo":
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC), true
	}
	return time.Time{}, false
}

// Spend is the answer: the total and each group's part, dearest first.
type Spend struct {
	// Since is the start of the window asked for; From, when later, is
	// the oldest time the history still holds: it counts from there.
	Since    time.Time    `json:"since"`
	From     time.Time    `json:"from"`
	Partial  bool         `json:"partial,omitempty"` // From is after Since: older records are gone
	Cost     price.Amount `json:"cost_usd"`
	Requests int64        `json:"requests"`
	Groups   []SpendGroup `json:"groups"`
}

// SpendGroup is one key, model, engine and day's part (a field the query
// did not group by is empty).
type SpendGroup struct {
	Key       string       `json:"key,omitempty"`
	Model     string       `json:"model,omitempty"`
	Engine    string       `json:"engine,omitempty"`
	Day       string       `json:"day,omitempty"` // 2026-12-07: the UTC day
	Requests  int64        `json:"requests"`
	TokensIn  int64        `json:"tokens_in"`
	TokensOut int64        `json:"tokens_out"`
	Cost      price.Amount `json:"cost_usd"`
}

// Spend sums the records q selects.
func (s *Store) Spend(q SpendQuery) (Spend, error) {
	c := s.core
	now := c.clock.Now()
	cutoff := now.Add(-time.Duration(c.maxAge.Load())).UnixMilli()
	out := Spend{Since: time.UnixMilli(q.Filter.Since).UTC(), From: time.UnixMilli(max(q.Filter.Since, cutoff)).UTC(), Groups: []SpendGroup{}}
	by := map[SpendGroup]*SpendGroup{}
	err := s.Scan(q.Filter, func(r *Record) bool {
		var k SpendGroup
		for _, g := range q.By {
			switch g {
			case "key":
				k.Key = r.Key
			case "model":
				k.Model = r.Model
			case "engine":
				k.Engine = r.Engine
			case "day":
				k.Day = time.UnixMilli(r.Time).UTC().Format(time.DateOnly)
			}
		}
		g := by[k]
		if g == nil {
			g = &k
			by[k] = g
		}
		g.Requests++
		g.TokensIn += max(r.TokensIn, 0)
		g.TokensOut += max(r.TokensOut, 0)
		g.Cost = price.Add(g.Cost, r.Cost)
		out.Requests++
		out.Cost = price.Add(out.Cost, r.Cost)
		return true
	})
	if err != nil {
		return out, err
	}
	out.Partial = out.From.After(out.Since)
	for _, g := range by {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b SpendGroup) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Engine, b.Engine), cmp.Compare(a.Day, b.Day))
	})
	return out, nil
}
