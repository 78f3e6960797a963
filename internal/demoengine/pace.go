package demoengine

import (
	"net/http"
	"time"
)

// Pacing: how long the demo engine holds an answer, so that a client, a
// gateway's hedging and its status page see an engine that takes time to
// think, as a real one does.

// firstTokenWait holds a completion's first content for FirstTokenDelay
// (every SlowEvery-th completion's, when set); false when the client went
// away meanwhile.
func (s *server) firstTokenWait(r *http.Request) bool {
	if s.o.FirstTokenDelay <= 0 {
		return true
	}
	if n := s.completions.Add(1); s.o.SlowEvery > 0 && n%int64(s.o.SlowEvery) != 0 {
		return true
	}
	select {
	case <-r.Context().Done():
		return false
	case <-time.After(s.o.FirstTokenDelay):
		return true
	}
}

// answerWait holds a JSON (non-streamed) completion as long as its stream
// would take, ChunkDelay per WordsPerChunk words, after its first-token
// delay: an answer that comes at once made the status page read 66,000
// tokens per second. It reports false when the client went away.
func (s *server) answerWait(r *http.Request, words []string) bool {
	if !s.firstTokenWait(r) {
		return false
	}
	if !s.o.PaceAnswers || s.o.ChunkDelay <= 0 {
		return true
	}
	chunks := (len(words) + s.o.WordsPerChunk - 1) / s.o.WordsPerChunk
	select {
	case <-r.Context().Done():
		return false
	case <-time.After(time.Duration(chunks) * s.o.ChunkDelay):
		return true
	}
}
