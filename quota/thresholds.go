package quota

import "time"

// Budget thresholds: a budget's use passing half of it, four fifths and
// all of it in its current window, each told once per window, so that an
// operator hears of a key nearing its budget before it is refused or sent
// to its over_budget fallback. The record of what was told lives with the
// key's counters, which outlive a config reload: a reload tells nothing
// again. Each gateway on a shared store tells what it sees, from the
// counts it has synced.

// Thresholds are the shares of a budget told, in percent.
var Thresholds = [...]int{50, 80, 100}

// told is what was told of one budget row and window: the window's start
// and the highest threshold passed in it.
type told struct {
	start   int64
	percent int
}

// Crossing is a budget passing a threshold.
type Crossing struct {
	Kind    Kind
	Limit   Limit // a money budget's counts nano-dollars
	Percent int   // the threshold passed: 50, 80 or 100
	Used    int64
	Reset   time.Time // when its window ends
}

// Crossings are the thresholds key's budgets under rules have passed in
// their current windows since they were last asked, the highest of each
// budget's window only (a request that takes a budget from 40 % to 90 %
// tells 80 %). Rates have none.
func (l *Limiter) Crossings(key string, rules Rules) []Crossing {
	c := l.core
	v, ok := c.keys.Load(key)
	if !ok {
		return nil
	}
	ks := v.(*keyState)
	now := c.clock.Now().Unix()
	var out []Crossing
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, b := range budgetRows {
		for _, lim := range b.limits(rules) {
			ctr, end := ks.roll(b.row, lim.Window, now)
			passed := 0
			for _, p := range Thresholds {
				if float64(ctr.used)*100 >= float64(lim.N)*float64(p) { // no int64 overflow at any budget
					passed = p
				}
			}
			t := &ks.told[b.row][lim.Window]
			if t.start != ctr.start {
				*t = told{start: ctr.start}
			}
			if passed > t.percent {
				t.percent = passed
				out = append(out, Crossing{Kind: b.kind, Limit: lim, Percent: passed, Used: ctr.used, Reset: time.Unix(end, 0).UTC()})
			}
		}
	}
	return out
}
