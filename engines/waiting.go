package engines

// WaitingForRoom reports whether the engine's start waits for its turn in
// one of its boxes (a memory_budget, a group): its state is Starting, but
// no process runs yet, so the status page says "waiting" rather than
// "starting". Safe with e.mu not held.
func (e *Engine) WaitingForRoom() bool {
	for _, b := range e.boxes {
		b.mu.Lock()
		for _, c := range b.claims {
			if c.e == e {
				b.mu.Unlock()
				return true
			}
		}
		b.mu.Unlock()
	}
	return false
}
