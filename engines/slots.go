package engines

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Slots save: llama-server keeps a conversation's KV cache in
// one of its slots (--parallel of them) and, with --slot-save-path, writes
// a slot to a file and reads it back on request:
//
//	POST /slots/{id}?action=save     {"filename": "…"}  → {"n_saved": tokens, …}
//	POST /slots/{id}?action=restore  {"filename": "…"}  → {"n_restored": tokens, …}
//
// A restart loses every slot, and the next turn of a long conversation pays
// its whole prefill again. With `slots save`, the gateway keeps that cache
// across a stop or a sleep:
//
//   - Which slot a session uses is the gateway's choice, not a guess: the
//     request is sent with "id_slot" (llama-server honours it, and queues a
//     request whose slot is busy). A session keeps its slot while it is in
//     the table; a new session takes a free slot, else the least recently
//     used one that serves nothing now; when every slot is busy the request
//     goes unpinned (llama-server picks) and nothing is saved for it.
//   - Before the engine is stopped or put to sleep, once its requests have
//     drained, the slot of each session in the table is saved to a file
//     named after the engine and the session (a hash: no session key reaches
//     a file name). A session is the caller's key's own: the
//     handler scopes session keys and prompt blocks by the key's name, so
//     another key's same session id or prompt names another file.
//   - When a session that has a file takes a slot (after a restart, or after
//     another session took its slot), the file is restored into it before
//     the request is sent. A restore that fails costs the prefill, and
//     the wait for its answer: the slots' timeout (3s) at most. The saves
//     before a stop are asked at once and delay it by that much at most
//     (slotcalls.go).
//   - At most max_sessions files per engine (default 64): saving one more
//     removes the oldest session's file from the slot directory.
//
// A session is recognised as pool affinity recognises it (handler/warmswap.go):
// by its key (X-Session-Id) when it has one, else by its prompt's chained
// block hashes (internal/prefix): a conversation's next turn starts with the
// blocks of the turn before, so the table keeps each session's last block
// (its tail), and a prompt whose blocks contain a tail continues that session
// (the longest wins). A prompt that continues none is a new session. A
// match by prefix whose slot is busy now is taken for a new session rather
// than queued behind it (two conversations sharing a system prompt are not
// one). A wrong match costs nothing but the prefill: llama-server reuses a
// restored cache only as far as the prompt matches it.

// Slot pins the leased request to one of the engine's slots for its
// session: key when the request names one (X-Session-Id), else the session
// its prompt's blocks (internal/prefix.Blocks) continue. It restores the
// session's saved slot first when the session was not in its slot (after a
// restart or a sleep). It returns the slot to send as id_slot, or false
// when the engine does not save slots, the request has no session (no key,
// no whole block), every slot is busy, or the lease is a fallback's borrow.
// The pin ends with the lease.
func (l *Lease) Slot(ctx context.Context, key string, blocks []uint64) (int, bool) {
	e := l.e
	if e.slots == nil || l.borrowed || l.slot >= 0 {
		return -1, false
	}
	e.mu.Lock()
	run := e.startSeq
	e.mu.Unlock()
	t := e.slots
	t.mu.Lock()
	t.newRun(run)
	session := uint64(0)
	if key != "" {
		session = sessionHash(key)
	} else {
		session = t.byPrefix(blocks)
	}
	id, restore := -1, ""
	if session != 0 {
		id, restore = t.take(session, e.now())
	}
	if id < 0 {
		t.forget(session) // no slot: nothing to know of it (the table stays bounded)
	}
	t.mu.Unlock()
	if id < 0 {
		return -1, false
	}
	l.slot = id
	if restore != "" {
		n, err := e.boundedSlotCall(ctx, l.base, t.cfg.RestorePath, id, restore, "n_restored")
		e.slots.mu.Lock()
		if err != nil {
			e.slots.count.Failures++
		} else {
			e.slots.count.Restores++
			e.slots.count.RestoredTokens += n
		}
		e.slots.mu.Unlock()
		switch {
		case errors.Is(err, errSlotCallsOff): // said once, when they stopped
		case err != nil:
			e.log.Info("slot not restored: the session's prompt is processed again", zap.Int("slot", id), zap.Error(err))
		default:
			if ce := e.log.Check(zap.DebugLevel, "slot restored"); ce != nil {
				ce.Write(zap.Int("slot", id), zap.Uint64("tokens", n))
			}
		}
	}
	return id, true
}

// saveSlots saves the slot of each session in the table, before the
// engine at base loses them (a stop or a sleep). The saves are asked all at
// once, each bounded by the slots' timeout (and all by stop_timeout), so a
// stop waits for them the slots' timeout at most, however many slots hang
// (asked one after another, three hung slots held a swap three times as
// long); llama-server queues them to its one loop anyway. Files beyond
// max_sessions are removed. Once the engine's slot calls stop (hung ones),
// none is asked.
func (e *Engine) saveSlots(base *url.URL) {
	t := e.slots
	if t == nil {
		return
	}
	held := t.resident()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(e.life, time.Duration(e.cfg.StopTimeout))
	defer cancel()
	ids := make([]int, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	saved := make([]bool, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			saved[i] = e.saveSlot(ctx, base, id, held[id])
		}()
	}
	wg.Wait()
	// the files beyond max_sessions go once every save has ended, in slot
	// order: a file is never removed while the engine writes it
	for i, id := range ids {
		if !saved[i] {
			continue
		}
		for _, f := range t.noteSaved(held[id]) {
			if err := os.Remove(filepath.Join(t.cfg.Dir, f)); err == nil {
				t.mu.Lock()
				t.count.Removed++
				t.mu.Unlock()
			}
		}
	}
}

// saveSlot saves one slot's session to its file and reports whether it
// was saved.
func (e *Engine) saveSlot(ctx context.Context, base *url.URL, id int, session uint64) bool {
	t := e.slots
	n, err := e.boundedSlotCall(ctx, base, t.cfg.SavePath, id, t.file(session), "n_saved")
	if errors.Is(err, errSlotCallsOff) {
		return false
	}
	t.mu.Lock()
	if err != nil {
		t.count.Failures++
		t.forget(session)
	} else {
		t.count.Saves++
		t.count.SavedTokens += n
	}
	t.mu.Unlock()
	if err != nil {
		e.log.Info("slot not saved", zap.Int("slot", id), zap.Error(err))
		return false
	}
	return true
}

// slotCall POSTs {"filename": file} to path with {id} filled in, and
// returns the number the engine answers in its member tokens.
func (e *Engine) slotCall(ctx context.Context, base *url.URL, path string, id int, file, tokens string) (uint64, error) {
	body, _ := json.Marshal(map[string]string{"filename": file})
	resp, err := e.ask(ctx, http.MethodPost, base, strings.ReplaceAll(path, "{id}", strconv.Itoa(id)), body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v map[string]json.RawMessage
	if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v) != nil {
		return 0, nil
	}
	n, _ := strconv.ParseUint(string(v[tokens]), 10, 64)
	return n, nil
}

func newSlotTable(cfg Config) *slotTable {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, cfg.Name)
	s := cfg.withSlotDefaults().Slots
	return &slotTable{cfg: *s, prefix: safe, slots: make([]slotUse, s.Parallel),
		tails: map[uint64]uint64{}, tailOf: map[uint64]uint64{}}
}
