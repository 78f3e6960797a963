//go:build !unix

package redistest

import (
	"os"
	"testing"
)

// Stall needs Unix signals (SIGSTOP): elsewhere the test that uses it is
// skipped.
func (s *Server) Stall(t testing.TB) {
	t.Helper()
	t.Skip("stalling redis-server needs SIGSTOP (Unix)")
}

// Resume ends a Stall; there is none to end here.
func (s *Server) Resume(t testing.TB) {}

func resume(*os.Process) error { return nil }
