package handler

import (
	"fmt"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Warm spares: a pool of engines the gateway starts (cmd) serves with
// the members that run, and a request for it starts a stopped member
// only when none runs. With warm_spare, a request that finds every ready
// member busy (saturated, or with warm_spare's count of requests waiting
// for a place, this one included) also starts the first stopped member
// that fits, in the background: the request goes on to the members that
// run (it never waits for the spare), and the spare takes requests by load
// once it is ready. A spare never stops another engine to make room (its
// group and memory budget must fit it, as for a preload), never starts
// while another member is starting, and its start's reason (the admin
// API's why.started, the status page, the log) says which members were
// busy.

// spareMember is what the warm-spare rule reads of a pool member.
type spareMember struct {
	id     string
	eng    *engines.Engine
	usable bool // its breaker lets requests through and it is healthy
	starts bool // the gateway runs it (cmd) and may start it (wake on)
}

// spareFor is the member to start as a warm spare for pool, and why: the
// first stopped one the gateway may start, when every usable ready member
// is busy past a warm_spare of n, none is starting or stopping, and one is
// ready; nil otherwise.
func spareFor(pool string, n int, members []spareMember) (*engines.Engine, string) {
	var busy []string
	var spare *engines.Engine
	for _, m := range members {
		if !m.usable {
			continue
		}
		switch m.eng.State() {
		case engines.Ready:
			words, ok := busyPast(m.eng.Occupancy(), n)
			if !ok {
				return nil, "" // a member has room
			}
			busy = append(busy, m.id+" "+words)
		case engines.Starting, engines.Draining:
			return nil, "" // one is coming up, or a stop is under way: no second start
		case engines.Stopped:
			if spare == nil && m.starts {
				spare = m.eng
			}
		}
	}
	if spare == nil || len(busy) == 0 {
		return nil, ""
	}
	return spare, fmt.Sprintf("warm spare for pool %s: every ready member busy (%s)", pool, strings.Join(busy, ", "))
}

// busyPast reports whether a member with this occupancy is busy past a
// warm_spare of n: saturated, or with n requests waiting for a place once
// one more arrives (its capacity known); and says so in words.
func busyPast(o engines.Occupancy, n int) (string, bool) {
	if o.Saturated {
		return fmt.Sprintf("saturated, %d in flight", o.Load), true
	}
	if o.Capacity > 0 && o.Load+1-o.Capacity >= n {
		return fmt.Sprintf("%d of %d places taken", o.Load, o.Capacity), true
	}
	return "", false
}
