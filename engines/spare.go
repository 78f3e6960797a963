package engines

import "go.uber.org/zap"

// StartSpare starts the stopped engine without waiting for it, for a pool
// whose ready members are all busy (a warm spare; handler/spare.go says
// when), and records why as its start's reason. Like a preload it never
// stops another engine to make room: every box it is in (group, memory
// budget) must fit it beside the engines that run, else it stays stopped.
// It reports whether a start began; a remote engine has nothing to start.
func (e *Engine) StartSpare(why string) bool {
	if !e.cfg.Managed() {
		return false
	}
	preloadMu.Lock() // a spare and a preload of one box never both start
	defer preloadMu.Unlock()
	for _, b := range e.boxes {
		if !b.fitsNow(e) {
			return false
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.state != Stopped {
		return false
	}
	e.log.Info("starting a warm spare", zap.String("why", why))
	e.beginStart(why)
	return true
}
