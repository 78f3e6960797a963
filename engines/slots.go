package engines

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
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

// Slots save (issue 26): llama-server keeps a conversation's KV cache in
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
//     a file name). A session is the caller's key's own (issue 39): the
//     handler scopes session keys and prompt blocks by the key's name, so
//     another key's same session id or prompt names another file.
//   - When a session that has a file takes a slot (after a restart, or after
//     another session took its slot), the file is restored into it before
//     the request is sent. A restore that fails costs only the prefill.
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

// The default slot endpoints: llama-server's. {id} is the slot's number.
const (
	DefaultSlotSavePath    = "/slots/{id}?action=save"
	DefaultSlotRestorePath = "/slots/{id}?action=restore"
	DefaultSlotSessions    = 64
)

// SlotsConfig is `slots save` of an engine.
type SlotsConfig struct {
	// Dir is the engine's slot directory (llama-server's
	// --slot-save-path), where the gateway removes the files of sessions
	// beyond MaxSessions. Required.
	Dir string `json:"dir"`
	// Parallel is how many slots the engine has (llama-server's
	// --parallel). Default: 1.
	Parallel int `json:"parallel,omitempty"`
	// MaxSessions bounds the sessions with a saved slot; saving one more
	// removes the oldest's file. Default: 64.
	MaxSessions int `json:"max_sessions,omitempty"`
	// SavePath and RestorePath are POSTed {"filename": …} to save and
	// restore slot {id}. Default: llama-server's.
	SavePath    string `json:"save_path,omitempty"`
	RestorePath string `json:"restore_path,omitempty"`
}

// SavesSlots reports whether the engine saves its sessions' slots.
func (c *Config) SavesSlots() bool { return c.Slots != nil }

func (c Config) withSlotDefaults() Config {
	if c.Slots == nil {
		return c
	}
	s := *c.Slots
	if s.Parallel == 0 {
		s.Parallel = 1
	}
	if s.MaxSessions == 0 {
		s.MaxSessions = DefaultSlotSessions
	}
	if s.SavePath == "" {
		s.SavePath = DefaultSlotSavePath
	}
	if s.RestorePath == "" {
		s.RestorePath = DefaultSlotRestorePath
	}
	c.Slots = &s
	return c
}

func (c Config) validateSlots() error {
	s := c.Slots
	if s == nil {
		return nil
	}
	if s.Dir == "" {
		return fmt.Errorf("engine %s: slots save needs the engine's slot directory (its --slot-save-path)", c.Name)
	}
	if s.Parallel < 0 || s.MaxSessions < 0 {
		return fmt.Errorf("engine %s: slots parallel and max_sessions may not be negative", c.Name)
	}
	for _, o := range []struct{ name, v string }{{"save_path", s.SavePath}, {"restore_path", s.RestorePath}} {
		if o.v != "" && (!strings.HasPrefix(o.v, "/") || !strings.Contains(o.v, "{id}")) {
			return fmt.Errorf("engine %s: slots %s takes a path starting with '/' with {id} for the slot, not %q", c.Name, o.name, o.v)
		}
	}
	return nil
}

// slotTable is which session each of an engine's slots holds, and the
// sessions whose slots are saved.
type slotTable struct {
	cfg    SlotsConfig
	prefix string // of file names: the engine's name, made safe

	mu     sync.Mutex
	run    uint64 // the engine's start the slots are of (Engine.startSeq)
	slots  []slotUse
	saved  []uint64          // sessions with a file, oldest first (at most MaxSessions)
	tails  map[uint64]uint64 // a session's last prompt block → the session (sessions by prefix)
	tailOf map[uint64]uint64 // the other way
	count  SlotCounts
}

type slotUse struct {
	session uint64 // 0: none
	used    time.Time
	busy    int // requests pinned to it now
}

// SlotCounts are what slots save did since the process started.
type SlotCounts struct {
	Saves          uint64 `json:"saves"`
	SavedTokens    uint64 `json:"saved_tokens"`
	Restores       uint64 `json:"restores"`
	RestoredTokens uint64 `json:"restored_tokens"`
	Failures       uint64 `json:"failures"` // saves and restores that failed
	Removed        uint64 `json:"removed"`  // files removed beyond max_sessions
}

// SlotsStatus is an engine's slots save now.
type SlotsStatus struct {
	Parallel    int `json:"parallel"`
	Sessions    int `json:"sessions"` // in a slot now
	Saved       int `json:"saved"`    // with a file
	MaxSessions int `json:"max_sessions"`
	SlotCounts
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

// sessionHash names a session key; never 0. The key comes scoped by the
// caller's gateway key (handler's req.session, issue 39), so the hash, and
// the file named after it, carry the scope. The hash is SHA-256's first 8
// bytes, not a fast one: a client chooses its key, and with FNV it could
// search for a key of its own scope that hashes as another tenant's
// session, in about 2³² tries; the same hash across restarts keeps a
// session's file name, so a save overwrites its file rather than leaving
// one behind.
func sessionHash(key string) uint64 {
	sum := sha256.Sum256([]byte(key))
	return max(binary.BigEndian.Uint64(sum[:8]), 1)
}

func (t *slotTable) file(session uint64) string {
	return t.prefix + "-" + strconv.FormatUint(session, 16) + ".bin"
}

// byPrefix finds the session a prompt of these blocks continues, or
// names a new one after its last block; 0 for a prompt of no whole block.
// It records the prompt's last block as the session's tail. Call with mu
// held.
func (t *slotTable) byPrefix(blocks []uint64) uint64 {
	if len(blocks) == 0 {
		return 0
	}
	last := blocks[len(blocks)-1]
	session := uint64(0)
	for i := len(blocks) - 1; i >= 0; i-- {
		if s, ok := t.tails[blocks[i]]; ok && !t.busy(s) {
			session = s
			break
		}
	}
	if session == 0 {
		session = max(last, 1)
	}
	if old, ok := t.tailOf[session]; ok {
		delete(t.tails, old)
	}
	t.tails[last], t.tailOf[session] = session, last
	return session
}

// busy reports whether session has a request in its slot now. Call with
// mu held.
func (t *slotTable) busy(session uint64) bool {
	for _, s := range t.slots {
		if s.session == session {
			return s.busy > 0
		}
	}
	return false
}

// forget drops what the table knows of session unless it is in a slot or
// saved. Call with mu held.
func (t *slotTable) forget(session uint64) {
	if session == 0 || slices.Contains(t.saved, session) {
		return
	}
	for _, s := range t.slots {
		if s.session == session {
			return
		}
	}
	if tail, ok := t.tailOf[session]; ok {
		delete(t.tails, tail)
		delete(t.tailOf, session)
	}
}

// take pins a request of session to a slot: its own, else a free one, else
// the least recently used idle one. It returns -1 when every slot is busy,
// and the file to restore first when the session has one and was not in
// its slot. Call with mu held.
func (t *slotTable) take(session uint64, now time.Time) (int, string) {
	pick := -1
	for i, s := range t.slots {
		if s.session == session {
			t.slots[i].busy++
			t.slots[i].used = now
			return i, ""
		}
		if s.busy > 0 {
			continue
		}
		if pick < 0 || s.session == 0 && t.slots[pick].session != 0 ||
			(s.session == 0) == (t.slots[pick].session == 0) && s.used.Before(t.slots[pick].used) {
			pick = i
		}
	}
	if pick < 0 {
		return -1, ""
	}
	gone := t.slots[pick].session
	t.slots[pick] = slotUse{session: session, used: now, busy: 1}
	t.forget(gone)
	if slices.Contains(t.saved, session) {
		return pick, t.file(session)
	}
	return pick, ""
}

// done unpins a request from slot i.
func (t *slotTable) done(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < len(t.slots) && t.slots[i].busy > 0 {
		t.slots[i].busy--
	}
}

// resident are the slots that hold a session, and clears the table: the
// engine is about to lose them.
func (t *slotTable) resident() map[int]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clearLocked()
}

// clearLocked empties the slots and returns what they held. Call with mu
// held.
func (t *slotTable) clearLocked() map[int]uint64 {
	out := map[int]uint64{}
	for i, s := range t.slots {
		if s.session != 0 {
			out[i] = s.session
		}
		t.slots[i] = slotUse{}
	}
	return out
}

// newRun forgets the slots of an earlier run of the engine (one that
// ended without a save: a crash), once per run. Call with mu held.
func (t *slotTable) newRun(run uint64) {
	if t.run == run {
		return
	}
	t.run = run
	for _, session := range t.clearLocked() {
		t.forget(session)
	}
}

// noteSaved records session's file as the newest, and returns the files of
// the sessions beyond max_sessions, to remove.
func (t *slotTable) noteSaved(session uint64) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.saved, session); i >= 0 {
		t.saved = slices.Delete(t.saved, i, i+1)
	}
	t.saved = append(t.saved, session)
	var gone []string
	for len(t.saved) > t.cfg.MaxSessions {
		oldest := t.saved[0]
		gone = append(gone, t.file(oldest))
		t.saved = t.saved[1:]
		t.forget(oldest)
	}
	return gone
}

func (t *slotTable) status() *SlotsStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &SlotsStatus{Parallel: len(t.slots), Saved: len(t.saved), MaxSessions: t.cfg.MaxSessions, SlotCounts: t.count}
	for _, u := range t.slots {
		if u.session != 0 {
			s.Sessions++
		}
	}
	return s
}

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
		ctx, cancel := context.WithTimeout(ctx, time.Duration(e.cfg.StopTimeout))
		n, err := e.slotCall(ctx, l.base, e.cfg.Slots.RestorePath, id, restore, "n_restored")
		cancel()
		e.slots.mu.Lock()
		if err != nil {
			e.slots.count.Failures++
		} else {
			e.slots.count.Restores++
			e.slots.count.RestoredTokens += n
		}
		e.slots.mu.Unlock()
		if err != nil {
			e.log.Info("slot not restored: the session's prompt is processed again", zap.Int("slot", id), zap.Error(err))
		} else if ce := e.log.Check(zap.DebugLevel, "slot restored"); ce != nil {
			ce.Write(zap.Int("slot", id), zap.Uint64("tokens", n))
		}
	}
	return id, true
}

// saveSlots saves the slot of each session in the table, before the
// engine at base loses them (a stop or a sleep), bounded by stop_timeout
// in all; files beyond max_sessions are removed.
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
	for _, id := range ids {
		session := held[id]
		n, err := e.slotCall(ctx, base, t.cfg.SavePath, id, t.file(session), "n_saved")
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
			continue
		}
		for _, f := range t.noteSaved(session) {
			if err := os.Remove(filepath.Join(t.cfg.Dir, f)); err == nil {
				t.mu.Lock()
				t.count.Removed++
				t.mu.Unlock()
			}
		}
	}
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
