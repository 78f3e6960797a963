package engines

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// group makes engines exclusive: at most one of them runs at a time. Groups
// are process-wide by name, because what they guard (a GPU) is: two sites or
// two config generations naming group gpu0 share it.
type group struct {
	name string
	turn chan struct{} // a one-slot semaphore; starts queue on it in order

	mu      sync.Mutex
	members map[*Engine]struct{}
}

var (
	groupsMu sync.Mutex
	groups   = map[string]*group{}
)

func joinGroup(name string, e *Engine) *group {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	g := groups[name]
	if g == nil {
		g = &group{name: name, turn: make(chan struct{}, 1), members: map[*Engine]struct{}{}}
		groups[name] = g
	}
	g.mu.Lock()
	g.members[e] = struct{}{}
	g.mu.Unlock()
	return g
}

func (g *group) leave(e *Engine) {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	g.mu.Lock()
	delete(g.members, e)
	empty := len(g.members) == 0
	g.mu.Unlock()
	if empty && groups[g.name] == g {
		delete(groups, g.name)
	}
}

// lock takes the group's turn: one start at a time.
func (g *group) lock(ctx context.Context) error {
	select {
	case g.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *group) unlock() { <-g.turn }

// evictOthers drains and stops every other running engine of the group.
// Call with the turn held.
func (g *group) evictOthers(self *Engine) {
	g.mu.Lock()
	others := make([]*Engine, 0, len(g.members))
	for o := range g.members {
		if o != self {
			others = append(others, o)
		}
	}
	g.mu.Unlock()
	for _, o := range others {
		// a peer that is starting is queued behind us for the turn: it
		// will evict us in its own turn; waiting for it here would deadlock
		if st := o.State(); st == Stopped || st == Starting {
			continue
		}
		self.log.Info("stopping group peer before start", zap.String("group", g.name), zap.String("peer", o.Name()))
		_ = o.Stop(self.life, true, StopGroup)
	}
}

// runningPeerLocked returns a member other than self that is not stopped,
// or nil. Call with mu held.
func (g *group) runningPeerLocked(self *Engine) *Engine {
	for o := range g.members {
		if o != self && o.State() != Stopped {
			return o
		}
	}
	return nil
}
