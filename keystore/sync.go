package keystore

import (
	"context"
	"errors"
	"time"
)

// notifier is a backend that hears of other front doors' changes.
type notifier interface{ changed() <-chan struct{} }

// loop saves the use and looks for other front doors' changes every
// interval, and at once when one is published. Its timer is re-armed only
// after a round has finished, so a slow store never stacks rounds.
func (c *core) loop() {
	defer close(c.done)
	var published <-chan struct{}
	c.mu.Lock()
	if n, ok := c.be.(notifier); ok {
		published = n.changed()
	}
	c.mu.Unlock()
	t := c.clock.NewTimer(c.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-published:
			c.refresh()
		case <-t.C():
			c.refresh()
			t.Reset(c.interval)
		}
	}
}

// refresh is one round: the embedded store opened if it was held, the
// records read again if another front door changed them (or the last read
// failed), the use saved and its totals read back.
func (c *core) refresh() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.refreshRecords()
	if err == nil {
		err = c.saveUse()
	}
	if err == nil {
		err = c.mismatch
	}
	c.setHealth(err)
	return err
}

// refreshRecords opens the held file or reads what changed. Call with mu
// held.
func (c *core) refreshRecords() error {
	if c.be == nil {
		be, err := openBolt(c.path, time.Millisecond)
		if err != nil {
			return err
		}
		c.be, c.stale = be, true
	}
	if !c.stale {
		v, err := c.be.version(context.Background())
		if err != nil {
			return err
		}
		if v == c.version {
			return nil
		}
	}
	if err := c.load(); c.stale {
		return err
	}
	return nil
}

// saveUse adds what was counted here since the last round to the store,
// and takes back every key's totals. Call with mu held.
func (c *core) saveUse() error {
	if len(c.acts) == 0 {
		return nil
	}
	deltas := map[string]Use{}
	names := make([]string, 0, len(c.acts))
	for name, a := range c.acts {
		names = append(names, name)
		if d, ok := a.take(); ok {
			deltas[name] = d
		}
	}
	totals, err := c.be.addUse(context.Background(), deltas, names)
	if err != nil {
		for name, d := range deltas {
			c.acts[name].giveBack(d)
		}
		return err
	}
	for name, u := range totals {
		c.acts[name].setTotal(u)
	}
	return nil
}

// setHealth tells the handles' hooks when the store starts or stops
// failing.
func (c *core) setHealth(err error) {
	bad := err != nil
	c.hooksMu.Lock()
	changed := c.degraded.Load() != bad || bad && c.lastErr != nil && c.lastErr.Error() != err.Error()
	c.degraded.Store(bad)
	c.lastErr = err
	hooks := make([]func(error), 0, len(c.hooks))
	for _, h := range c.hooks {
		hooks = append(hooks, h)
	}
	c.hooksMu.Unlock()
	if !changed {
		return
	}
	for _, h := range hooks {
		h(err)
	}
}

// close stops the loop, saves the use and closes the store.
func (c *core) close() error {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.be == nil {
		return nil
	}
	var err error
	if !c.stale {
		err = c.saveUse()
	}
	return errors.Join(err, c.be.close())
}
