package demoengine

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Warm swaps, played with scripted timings so tests and the
// bench can measure them:
//
//   - vLLM's sleep mode: POST /sleep?level=N (takes -sleep-time), POST
//     /wake_up (takes -wake-time), GET /is_sleeping. While asleep every
//     completion answers 503. A sleep drops every slot's cache, as vLLM's
//     level 1 drops its KV cache. -fail-sleep and -fail-wake make them
//     answer 500.
//   - llama-server's slots: -slots N slots, each holding the tokens of the
//     last prompt it processed. A completion uses the slot its "id_slot"
//     names (else slot 0), and processes only the tokens past what the slot
//     already holds (each costs -prefill-per-token). With -slot-save-path,
//     POST /slots/{id}?action=save|restore {"filename"} writes and reads a
//     slot's tokens (as llama-server answers: n_saved, n_restored).
//
// GET /counters answers what it did: prompt tokens processed, prompt tokens
// found in a slot's cache, tokens restored, sleeps and wakes; /metrics has
// the same as demo:* counters.

type warmState struct {
	mu        sync.Mutex
	asleep    bool
	slots     [][]string
	processed int64 // prompt tokens processed (prefilled)
	cached    int64 // prompt tokens found in the slot's cache
	restored  int64 // tokens restored from files
	saved     int64 // tokens saved to files
	sleeps    int64
	wakes     int64
}

// Counters are what GET /counters answers.
type Counters struct {
	Processed int64 `json:"prompt_tokens_processed"`
	Cached    int64 `json:"prompt_tokens_cached"`
	Restored  int64 `json:"tokens_restored"`
	Saved     int64 `json:"tokens_saved"`
	Sleeps    int64 `json:"sleeps"`
	Wakes     int64 `json:"wakes"`
	Asleep    bool  `json:"asleep"`
}

func (s *server) warmRoutes(mux *http.ServeMux) {
	n := max(s.o.Slots, 1)
	s.warm.slots = make([][]string, n)
	if s.o.SlotSavePath != "" {
		_ = os.MkdirAll(s.o.SlotSavePath, 0o755) // as llama-server does
	}
	mux.HandleFunc("POST /sleep", s.sleepOrWake(true))
	mux.HandleFunc("POST /wake_up", s.sleepOrWake(false))
	mux.HandleFunc("GET /is_sleeping", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"is_sleeping": s.sleeping()})
	})
	mux.HandleFunc("POST /slots/{id}", s.slotAction)
	mux.HandleFunc("GET /counters", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.counters())
	})
}

// sleepOrWake is POST /sleep (sleep true: every slot's cache is dropped)
// or POST /wake_up, with its scripted time and failure.
func (s *server) sleepOrWake(sleep bool) http.HandlerFunc {
	took, fail, counter, what := s.o.WakeTime, s.o.FailWake, &s.warm.wakes, "wake"
	if sleep {
		took, fail, counter, what = s.o.SleepTime, s.o.FailSleep, &s.warm.sleeps, "sleep"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(took)
		if fail {
			apiError(w, http.StatusInternalServerError, "server_error", what+" failed (simulated)")
			return
		}
		s.warm.mu.Lock()
		s.warm.asleep = sleep
		*counter++
		if sleep {
			for i := range s.warm.slots {
				s.warm.slots[i] = nil
			}
		}
		s.warm.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
}

func (s *server) sleeping() bool {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	return s.warm.asleep
}

func (s *server) counters() Counters {
	s.warm.mu.Lock()
	defer s.warm.mu.Unlock()
	return Counters{Processed: s.warm.processed, Cached: s.warm.cached, Restored: s.warm.restored,
		Saved: s.warm.saved, Sleeps: s.warm.sleeps, Wakes: s.warm.wakes, Asleep: s.warm.asleep}
}

// prefill processes a completion's prompt in its slot: the tokens past the
// slot's cached prefix cost -prefill-per-token each.
func (s *server) prefill(req *chatRequest) {
	var tokens []string
	for _, m := range req.Messages {
		tokens = append(tokens, "<"+m.Role+">")
		if str, ok := m.Content.(string); ok {
			tokens = append(tokens, strings.Fields(str)...)
		}
	}
	if p, ok := req.Prompt.(string); ok {
		tokens = append(tokens, strings.Fields(p)...)
	}
	s.warm.mu.Lock()
	id := 0
	if req.IDSlot != nil && *req.IDSlot >= 0 && *req.IDSlot < len(s.warm.slots) {
		id = *req.IDSlot
	}
	cache := s.warm.slots[id]
	same := 0
	for same < len(cache) && same < len(tokens) && cache[same] == tokens[same] {
		same++
	}
	fresh := len(tokens) - same
	s.warm.processed += int64(fresh)
	s.warm.cached += int64(same)
	s.warm.slots[id] = tokens
	s.warm.mu.Unlock()
	time.Sleep(time.Duration(fresh) * s.o.PrefillPerToken)
}

// slotAction is llama-server's POST /slots/{id}?action=save|restore.
func (s *server) slotAction(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 || id >= len(s.warm.slots) {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "no such slot")
		return
	}
	var body struct {
		Filename string `json:"filename"`
	}
	if s.o.SlotSavePath == "" {
		apiError(w, http.StatusNotImplemented, "not_supported_error", "This server does not support slots action. Start it with `--slot-save-path`")
		return
	}
	if json.NewDecoder(r.Body).Decode(&body) != nil || body.Filename == "" || strings.ContainsAny(body.Filename, `/\`) {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "Invalid filename")
		return
	}
	file := filepath.Join(s.o.SlotSavePath, body.Filename)
	switch r.URL.Query().Get("action") {
	case "save":
		s.warm.mu.Lock()
		tokens := s.warm.slots[id]
		s.warm.saved += int64(len(tokens))
		s.warm.mu.Unlock()
		b, _ := json.Marshal(tokens)
		if err := os.WriteFile(file, b, 0o600); err != nil {
			apiError(w, http.StatusInternalServerError, "server_error", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": body.Filename, "n_saved": len(tokens), "n_written": len(b)})
	case "restore":
		b, err := os.ReadFile(file)
		var tokens []string
		if err == nil {
			err = json.Unmarshal(b, &tokens)
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "Unable to restore slot: "+err.Error())
			return
		}
		s.warm.mu.Lock()
		s.warm.slots[id] = tokens
		s.warm.restored += int64(len(tokens))
		s.warm.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"id_slot": id, "filename": body.Filename, "n_restored": len(tokens), "n_read": len(b)})
	default:
		apiError(w, http.StatusBadRequest, "invalid_request_error", "Invalid action")
	}
}

// warmMetrics are the counters in /metrics.
func (s *server) warmMetrics(w http.ResponseWriter) {
	c := s.counters()
	for _, m := range []struct {
		name string
		v    int64
	}{{"prompt_tokens_processed_total", c.Processed}, {"prompt_tokens_cached_total", c.Cached},
		{"tokens_restored_total", c.Restored}, {"sleeps_total", c.Sleeps}, {"wakes_total", c.Wakes}} {
		fmt.Fprintf(w, "# TYPE demo:%s counter\ndemo:%s %d\n", m.name, m.name, m.v)
	}
}
