package engines

import (
	"math"
	"time"
)

// A start that can only be refused is refused at once: when what
// min_loaded and evict never hold cannot be freed before the start's
// max_wait ends, and the start does not fit beside it, waiting max_wait
// (30 s by default) only delays the same 503 engine_busy. Engines in use
// are not counted: their requests may end, and at max_wait a start may
// drain them.

// keptPastWait reports whether the start of self, needing need, does not
// fit beside the holders that min_loaded or evict never keep longer than
// left, the rest of its wait.
func keptPastWait(budget int64, views []view, self *Engine, need int64, left time.Duration) bool {
	var kept int64
	for _, v := range views {
		if v.holds && v.e != self && v.keep && keptFor(v) > left {
			kept += v.need
		}
	}
	return kept+need > budget
}

// keptFor is the least time a kept holder keeps its share: the rest of
// its min_loaded; for evict never, until its idle_timeout can stop it
// (forever without one; an idle_timeout at least while it serves).
func keptFor(v view) time.Duration {
	if !v.never {
		return v.keepFor
	}
	idle := time.Duration(v.e.cfg.IdleTimeout)
	switch {
	case idle <= 0:
		return math.MaxInt64
	case v.inFlight > 0:
		return idle
	}
	return v.idleFor
}
