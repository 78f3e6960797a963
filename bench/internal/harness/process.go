//go:build unix

// Package harness is what the benchmark programs share: child processes that
// never outlive the benchmark, free loopback ports, and the Caddy process's
// CPU time and resident memory read from /proc.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is a child the benchmark started; Stop ends it and its children.
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs argv with stdout and stderr appended to logPath. The child gets
// its own process group (Stop reaches what it spawns, e.g. engines) and, on
// Linux, a parent-death signal, so even a killed benchmark leaves nothing
// running.
func Start(name string, argv []string, env []string, logPath string) (*Process, error) {
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %v", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %v", name, err)
	}
	p := &Process{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

// StartCaddy runs `caddy run` with a Caddyfile, its output appended to
// logPath, and keeps Caddy's autosave and storage (XDG_CONFIG_HOME,
// XDG_DATA_HOME) under outDir/xdg, inside the benchmark's output.
func StartCaddy(caddyBin, caddyfile, outDir, logPath string) (*Process, error) {
	xdg, _ := filepath.Abs(filepath.Join(outDir, "xdg"))
	return Start("caddy",
		[]string{caddyBin, "run", "--config", caddyfile, "--adapter", "caddyfile"},
		[]string{"XDG_CONFIG_HOME=" + xdg + "/config", "XDG_DATA_HOME=" + xdg + "/data"},
		logPath)
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the child has ended, and why.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the child's process group and SIGKILL after grace.
// It is safe to call more than once.
func (p *Process) Stop(grace time.Duration) {
	if p == nil {
		return
	}
	if exited, _ := p.Exited(); exited {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// FreePorts returns n distinct free ports on 127.0.0.1. They are held open
// together while picked, so they differ; another program could still take one
// before the caller binds it, which on a benchmark machine does not happen.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitHTTP polls url until it answers anything at all (the listener is up),
// p exits, or timeout passes.
func WaitHTTP(ctx context.Context, url string, p *Process, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for attempt := 0; time.Now().Before(deadline) && attempt < 1000; attempt++ {
		if p != nil {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited while starting: %v", p.Name, err)
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within %v", url, timeout)
}

// RequireLoopback refuses any base URL that is not http://127.0.0.1:port:
// the benchmark sends traffic nowhere else.
func RequireLoopback(base string) error {
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		return errors.New("only http://127.0.0.1:<port> targets are allowed, got " + base)
	}
	return nil
}
