package engines

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"go.uber.org/zap"
)

// process is one run of an engine's command, in a process group of its own so
// that stopping it also stops whatever it spawned (ollama's runners, a shell's
// children). What a process group is and how it is signalled depends on the
// platform: process_unix.go has it, process_other.go refuses local engines
// where it has nothing (Windows).
type process struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when the process has exited
	err     error         // exit error, valid after done
	output  sync.WaitGroup
}

// spawn starts argv with the engine's output going to lines and log.
func spawn(argv []string, dir string, env []string, lines *lineBuffer, log *zap.Logger) (*process, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	if !canStartProcesses {
		return nil, errors.New("starting processes is not supported on this platform")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	// the child has its own copies of the write ends; ours must go so that
	// the readers see EOF when the child's group exits
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := &process{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	p.output.Add(2)
	go func() { defer p.output.Done(); defer outR.Close(); lines.pump(outR, log, "stdout") }()
	go func() { defer p.output.Done(); defer errR.Close(); lines.pump(errR, log, "stderr") }()
	go func() {
		p.err = cmd.Wait()
		// anything the engine left behind in its group goes with it
		killGroup(cmd.Process.Pid)
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitReason describes how the process ended, for errors.
func (p *process) exitReason() string {
	if p.err == nil {
		return "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if sig := killedBy(ee); sig != "" {
			return "killed by signal " + sig
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return p.err.Error()
}
