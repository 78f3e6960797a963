package statuspage

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// The page's spend charts: what each key and each model cost per UTC day
// over the last 7 or 30 days, summed by the same code as GET
// /llm_gateway/spend (history.Store.Spend, grouped by key, model and day),
// so the page and the admin call agree to the nano-dollar:
//
//	GET <prefix>/api/spend?days=7|30

// spendRanges are the day counts the page offers.
var spendRanges = map[string]int{"7": 7, "30": 30}

// spendCharts is what the page draws. Days are UTC dates, oldest first;
// each row's Days holds its cost on each of them.
type spendCharts struct {
	Since   time.Time    `json:"since"`             // the first day's start
	From    time.Time    `json:"from"`              // when the history's records begin, if later
	Partial bool         `json:"partial,omitempty"` // older records are gone (history max_age)
	Days    []string     `json:"days"`
	Cost    price.Amount `json:"cost_usd"`
	Keys    []spendRow   `json:"keys"`   // dearest first
	Models  []spendRow   `json:"models"` // dearest first
}

// spendRow is one key's or model's spend: in all and per day.
type spendRow struct {
	Name     string         `json:"name"` // "" is the requests without a key
	Requests int64          `json:"requests"`
	Cost     price.Amount   `json:"cost_usd"`
	Days     []price.Amount `json:"days"`
}

// makeSpend sums the history's last n UTC days, today included, in one
// pass.
func makeSpend(st *history.Store, n int, now time.Time) (spendCharts, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	since := today.AddDate(0, 0, 1-n)
	sp, err := st.Spend(history.SpendQuery{Filter: history.Filter{Since: since.UnixMilli()}, By: []string{"key", "model", "day"}})
	if err != nil {
		return spendCharts{}, err
	}
	c := spendCharts{Since: sp.Since, From: sp.From, Partial: sp.Partial, Cost: sp.Cost, Days: make([]string, n)}
	day := map[string]int{}
	for i := range n {
		c.Days[i] = since.AddDate(0, 0, i).Format(time.DateOnly)
		day[c.Days[i]] = i
	}
	keys, models := map[string]*spendRow{}, map[string]*spendRow{}
	for _, g := range sp.Groups {
		i, ok := day[g.Day]
		if !ok {
			continue // arrived after now: a clock set back
		}
		for _, r := range []*spendRow{rowOf(keys, g.Key, n), rowOf(models, g.Model, n)} {
			r.Requests += g.Requests
			r.Cost = price.Add(r.Cost, g.Cost)
			r.Days[i] = price.Add(r.Days[i], g.Cost)
		}
	}
	c.Keys, c.Models = dearestFirst(keys), dearestFirst(models)
	return c, nil
}

func rowOf(rows map[string]*spendRow, name string, n int) *spendRow {
	r := rows[name]
	if r == nil {
		r = &spendRow{Name: name, Days: make([]price.Amount, n)}
		rows[name] = r
	}
	return r
}

func dearestFirst(rows map[string]*spendRow) []spendRow {
	out := make([]spendRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b spendRow) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func (s *Server) serveSpend(w http.ResponseWriter, r *http.Request) {
	st := s.historyStore()
	if st == nil {
		writeError(w, http.StatusNotFound, "history_off", "the request history is off in the running config (history off): spend is summed from it")
		return
	}
	n, ok := spendRanges[r.URL.Query().Get("days")]
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_range", "days: want 7 or 30")
		return
	}
	c, err := cachedSpend(st, n, s.clock().Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "history_failed", "reading the request history: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// spendCache keeps each range's sums for chartsFresh: however many pages
// are open, a month of history is read at most once per range in that
// time.
var spendCache struct {
	sync.Mutex
	st    *history.Store
	at    map[int]time.Time
	ready map[int]spendCharts
}

func cachedSpend(st *history.Store, n int, now time.Time) (spendCharts, error) {
	spendCache.Lock()
	defer spendCache.Unlock()
	if spendCache.st != st {
		spendCache.st, spendCache.at, spendCache.ready = st, map[int]time.Time{}, map[int]spendCharts{}
	}
	if at, ok := spendCache.at[n]; ok && now.Sub(at) < chartsFresh && !now.Before(at) {
		return spendCache.ready[n], nil
	}
	c, err := makeSpend(st, n, now)
	if err != nil {
		return c, err
	}
	spendCache.at[n], spendCache.ready[n] = now, c
	return c, nil
}
