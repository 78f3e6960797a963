package demoengine

import (
	"net/http"
	"time"
)

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
