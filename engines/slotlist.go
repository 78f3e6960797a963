package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"
)

// llama-server's slot list: GET /slots answers one object per
// slot, each saying whether it is processing a request:
//
//	[{"id":0,"id_task":12,"n_ctx":8192,"is_processing":true,…},{"id":1,…,"is_processing":false,…}]
//
// (builds before 2024-09 said "state": 0 for idle instead). Its /metrics
// counts requests, not slots: the list is what says how many a request can
// find free, so a pool knows an engine's capacity without max_concurrent
// and passes over one whose every slot is taken. A build without the list
// (--no-slots, or older ones without --slots) answers 501 or 404: it is not
// asked again for slotsRetry.

const (
	maxSlots   = 4096            // slots counted of one list
	slotsRetry = 5 * time.Minute // before asking again an engine that refused
)

// slot is what the gateway reads of one slot; its prompt and parameters
// are skipped.
type slot struct {
	IsProcessing *bool `json:"is_processing"`
	State        *int  `json:"state"`
}

// readSlots reads the engine's slot list once: how many slots, how many
// busy; 0, 0 when it has none to give (off, refused, unreadable).
func (e *Engine) readSlots(ctx context.Context, base *url.URL) (total, busy int) {
	path := e.cfg.SignalsSlotsPath
	if path == "" || path == SignalsOff {
		return 0, 0
	}
	now := e.clock.Now()
	e.sig.mu.Lock()
	after := e.sig.slotsAfter
	e.sig.mu.Unlock()
	if now.Before(after) {
		return 0, 0
	}
	body, status, err := e.getSignal(ctx, base, path)
	if err != nil {
		if status != 0 { // refused: --no-slots, or a build without the list
			e.sig.mu.Lock()
			e.sig.slotsAfter = now.Add(slotsRetry)
			e.sig.mu.Unlock()
		}
		return 0, 0
	}
	defer body.Close()
	total, busy, err = ParseSlots(io.LimitReader(body, maxSignalsBody))
	if err != nil {
		return 0, 0
	}
	return total, busy
}

// ParseSlots reads a llama-server slot list: how many slots, how many are
// processing (at most maxSlots counted).
func ParseSlots(r io.Reader) (total, busy int, err error) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil {
		return 0, 0, err
	} else if t != json.Delim('[') {
		return 0, 0, fmt.Errorf("a slot list is a JSON array, not %v", t)
	}
	for dec.More() && total < maxSlots {
		var s slot
		if err := dec.Decode(&s); err != nil {
			return 0, 0, err
		}
		total++
		switch {
		case s.IsProcessing != nil:
			if *s.IsProcessing {
				busy++
			}
		case s.State != nil:
			if *s.State != 0 {
				busy++
			}
		}
	}
	return total, busy, nil
}
