// Package redistest runs a real redis-server for tests: Debian's
// redis-server, which .ci/run installs.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Server is a real redis-server on a free loopback port, with an
// append-only file (written out on SIGTERM), so that a stop and a start
// keep its data as a real deployment's would.
type Server struct {
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	exit chan struct{}
}

// Start starts redis-server. Without it the test is skipped, except
// in CI (CI=true), where .ci/run installs it and its absence is a failure.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (.ci/run installs Debian's redis-server)")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	s := &Server{bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	// a free port may be taken between looking and binding: try again
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		err = s.start()
		if err == nil {
			return s
		}
		if try == 4 {
			t.Fatal(err)
		}
	}
}

func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start runs the server and returns once it says it accepts connections.
func (s *Server) start() error {
	s.cmd = exec.Command(s.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
		"--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
		"--daemonize", "no", "--loglevel", "notice", "--protected-mode", "no")
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exit = make(chan struct{})
	ready := make(chan struct{})
	var log bytes.Buffer
	var logMu sync.Mutex
	go func() {
		defer close(s.exit)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
				io.Copy(io.Discard, out)
				break
			}
		}
		s.cmd.Wait()
	}()
	select {
	case <-ready:
		return nil
	case <-s.exit:
		logMu.Lock()
		defer logMu.Unlock()
		return fmt.Errorf("redis-server on port %d did not start:\n%s", s.port, log.String())
	}
}

// stop shuts the server down (SIGTERM: it writes its append-only file and
// exits) and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	resume(s.cmd.Process) // a stalled server gets its SIGTERM now
	<-s.exit
	s.cmd = nil
}

func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}
