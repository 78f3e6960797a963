package engines

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Hedge is when a request that has had no content yet from its attempt
// starts the next candidate beside it (a pool's next member, the engine's
// fallback, a body fallback): the first content wins, the other attempt is
// cancelled. Off unless After is set or Auto is true.
type Hedge struct {
	// After is the time without a first content event after which the
	// next candidate starts as well.
	After caddy.Duration `json:"after,omitempty"`

	// Auto sets After from the engine's observed time to first token
	// (handler/hedge.go: its 99th percentile, at least HedgeAutoFloor).
	Auto bool `json:"auto,omitempty"`

	// Budget caps the hedges: at most this share of the requests of the
	// last minute may start a hedge (beyond it, a floor of three at once
	// and one more every 20 s: handler/hedgestats.go). Default: 0.1.
	Budget float64 `json:"budget,omitempty"`
}

// DefaultHedgeBudget is the share of requests that may hedge.
const DefaultHedgeBudget = 0.1

// HedgeAutoFloor is the least delay hedge_after auto waits, however fast
// an engine's first tokens are: a hedge sooner than this costs attempts
// and saves the caller nothing they would notice.
const HedgeAutoFloor = 250 * time.Millisecond

// On reports whether h hedges.
func (h *Hedge) On() bool { return h != nil && (h.After > 0 || h.Auto) }

// Share is the budget, with its default.
func (h *Hedge) Share() float64 {
	if h == nil || h.Budget == 0 {
		return DefaultHedgeBudget
	}
	return h.Budget
}

// Validate checks a hedge of owner ("engine a", "pool p").
func (h *Hedge) Validate(owner string) error {
	if h == nil {
		return nil
	}
	if h.After < 0 {
		return fmt.Errorf("%s: hedge_after may not be negative", owner)
	}
	if h.Auto && h.After > 0 {
		return fmt.Errorf("%s: hedge_after is a duration or auto, not both", owner)
	}
	if h.Budget < 0 || h.Budget > 1 {
		return fmt.Errorf("%s: hedge_budget is a share of requests from 0%% to 100%%, not %g", owner, h.Budget*100)
	}
	if h.Budget > 0 && !h.On() {
		return fmt.Errorf("%s: hedge_budget needs hedge_after (a duration or auto)", owner)
	}
	return nil
}
