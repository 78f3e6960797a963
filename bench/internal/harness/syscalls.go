//go:build unix

package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Syscalls are the system calls a process made over a span, all its
// threads: the total and the kinds a proxy's relay is made of.
type Syscalls struct {
	Total, Read, Write, Epoll, Futex int64
	Tool                             string // what counted them: perf or strace
}

// Other is what is not a read, a write, an epoll wait or a futex.
func (s Syscalls) Other() int64 { return s.Total - s.Read - s.Write - s.Epoll - s.Futex }

// SyscallCounter counts a process's system calls from StartSyscalls to
// Stop. It uses `perf stat` on the kernel's syscall tracepoints when perf
// can open them (a count in the kernel, next to no overhead), else
// `strace -c -f` (a stop per call: the counts hold, the process's speed
// does not, and with it how its reads coalesce).
type SyscallCounter struct {
	tool string
	cmd  *exec.Cmd
	out  string
}

// perfEvents are counted in this order; Go on Linux waits in epoll_pwait.
var perfEvents = []string{
	"raw_syscalls:sys_enter",
	"syscalls:sys_enter_read",
	"syscalls:sys_enter_write",
	"syscalls:sys_enter_epoll_pwait",
	"syscalls:sys_enter_futex",
}

// SyscallTool names the counter StartSyscalls will use, or says why there
// is none.
func SyscallTool() (string, error) {
	if p, err := exec.LookPath("perf"); err == nil {
		// perf may be installed without access to the tracepoints
		if exec.Command(p, "stat", "-x,", "-e", perfEvents[0], "--", "true").Run() == nil {
			return "perf", nil
		}
	}
	if _, err := exec.LookPath("strace"); err == nil {
		return "strace", nil
	}
	return "", errors.New("neither perf (with access to the syscall tracepoints) nor strace is installed")
}

// StartSyscalls attaches a counter to pid; outDir receives its output file.
func StartSyscalls(pid int, outDir string) (*SyscallCounter, error) {
	tool, err := SyscallTool()
	if err != nil {
		return nil, err
	}
	c := &SyscallCounter{tool: tool, out: filepath.Join(outDir, tool+"-syscalls.txt")}
	p := strconv.Itoa(pid)
	if tool == "perf" {
		c.cmd = exec.Command("perf", "stat", "-x,", "-o", c.out, "-e", strings.Join(perfEvents, ","), "-p", p)
	} else {
		c.cmd = exec.Command("strace", "-c", "-f", "-q", "-o", c.out, "-p", p)
	}
	c.cmd.SysProcAttr = childAttr()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", tool, err)
	}
	// both attach after they start; a call they miss is one the span started
	// without, so give them the time to attach before the caller's span begins
	time.Sleep(300 * time.Millisecond)
	return c, nil
}

// Stop ends the count and reads it.
func (c *SyscallCounter) Stop() (Syscalls, error) {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
		return Syscalls{}, fmt.Errorf("%s did not stop", c.tool)
	}
	f, err := os.Open(c.out)
	if err != nil {
		return Syscalls{}, err
	}
	defer f.Close()
	s := Syscalls{Tool: c.tool}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if c.tool == "perf" {
			parsePerfLine(&s, sc.Text())
		} else {
			parseStraceLine(&s, sc.Text())
		}
	}
	if s.Total == 0 {
		return s, fmt.Errorf("%s counted no system call (see %s)", c.tool, c.out)
	}
	return s, sc.Err()
}

// parsePerfLine reads one line of `perf stat -x,`: count,unit,event,…
func parsePerfLine(s *Syscalls, line string) {
	f := strings.Split(line, ",")
	if len(f) < 3 {
		return
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return
	}
	switch f[2] {
	case "raw_syscalls:sys_enter":
		s.Total = n
	case "syscalls:sys_enter_read":
		s.Read = n
	case "syscalls:sys_enter_write":
		s.Write = n
	case "syscalls:sys_enter_epoll_pwait":
		s.Epoll = n
	case "syscalls:sys_enter_futex":
		s.Futex = n
	}
}

// parseStraceLine reads one row of `strace -c`'s table:
// % time, seconds, usecs/call, calls, [errors,] syscall.
func parseStraceLine(s *Syscalls, line string) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return
	}
	n, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return
	}
	switch f[len(f)-1] {
	case "total":
		s.Total = n
	case "read":
		s.Read = n
	case "write":
		s.Write = n
	case "epoll_pwait", "epoll_wait":
		s.Epoll += n
	case "futex":
		s.Futex = n
	}
}
