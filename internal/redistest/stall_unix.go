//go:build unix

package redistest

import (
	"os"
	"syscall"
	"testing"
)

// Stall stops the server's process (SIGSTOP) until Resume. Meanwhile it
// reads nothing and answers nothing, while the kernel still accepts
// connections and what clients send; resumed, it runs every command it was
// sent, even those whose client has given up and closed the connection, as
// a server stalled by its host (swapping, a fork, a noisy neighbour) does.
func (s *Server) Stall(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume ends a Stall (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := resume(s.cmd.Process); err != nil {
		t.Fatal(err)
	}
}

func resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
