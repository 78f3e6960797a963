package engines

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The slot table: which session each slot holds, and which are saved; slots.go
// saves and restores them on the engine.

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

	// hung is how many slot calls in a row hung; at maxHungSlotCalls the
	// engine's slot calls are stopped until its next run (slotcalls.go)
	hung    int
	stopped bool
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
	Failures       uint64 `json:"failures"`       // saves and restores that failed
	Hung           uint64 `json:"hung,omitempty"` // of them, those given up at slots save's timeout
	Removed        uint64 `json:"removed"`        // files removed beyond max_sessions
}

// SlotsStatus is an engine's slots save now.
type SlotsStatus struct {
	Parallel    int `json:"parallel"`
	Sessions    int `json:"sessions"` // in a slot now
	Saved       int `json:"saved"`    // with a file
	MaxSessions int `json:"max_sessions"`
	// CallsStopped: the engine's last slot calls hung, and it is asked no
	// more until it restarts.
	CallsStopped bool `json:"calls_stopped,omitempty"`
	SlotCounts
}

// sessionHash names a session key; never 0. The key comes scoped by the
// caller's gateway key (handler's req.session), so the hash, and
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
	t.hung, t.stopped = 0, false // a new process: its threads are its own
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
	s := &SlotsStatus{Parallel: len(t.slots), Saved: len(t.saved), MaxSessions: t.cfg.MaxSessions, SlotCounts: t.count, CallsStopped: t.stopped}
	for _, u := range t.slots {
		if u.session != 0 {
			s.Sessions++
		}
	}
	return s
}
