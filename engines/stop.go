package engines

import (
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Stopping an engine's process. Without a stop command: SIGTERM to its
// process group, SIGKILL after stop_timeout. With one (stop_cmd, llama-swap's
// cmdStop; issue 15), the command goes first: `docker stop qwen` for an
// engine run with `docker run`, whose CLI would not pass a signal on to the
// container. The signals still follow when the command fails at once (SIGTERM
// then), or when the engine outlives stop_timeout (SIGTERM, and SIGKILL
// after another stop_timeout): whatever the command does, the engine ends.

// stopProcess ends proc and returns once it has exited, its output is read,
// and its stop command (if any) has ended too. port is the port the engine
// was started with, for {engine.port}.
func (e *Engine) stopProcess(proc *process, port int) {
	defer proc.output.Wait()
	if proc.exited() {
		return
	}
	grace := time.Duration(e.cfg.StopTimeout)
	if len(e.cfg.StopCmd) > 0 && e.runStopCmd(proc, port, grace) {
		return
	}
	pgid := proc.pid()
	terminateGroup(pgid)
	t := e.clock.NewTimer(grace)
	defer t.Stop()
	select {
	case <-proc.done:
	case <-t.C():
		e.log.Warn("engine still running stop_timeout after SIGTERM: killing it",
			zap.Int("pid", pgid), zap.Duration("stop_timeout", grace))
		killGroup(pgid)
		<-proc.done
	}
}

// runStopCmd runs the engine's stop command and waits, at most grace from
// its start, for proc to exit. It reports whether proc has exited; false
// means the signals must follow: the command could not start, failed, or
// grace ran out. The command itself is given the rest of grace to finish
// after the engine is gone (`docker stop` returns a little after the
// container's CLI does), and is killed if it outlives it.
func (e *Engine) runStopCmd(proc *process, port int, grace time.Duration) bool {
	argv := e.stopArgv(proc.pid(), port)
	env := make([]string, len(e.cfg.Env))
	for i, kv := range e.cfg.Env {
		env[i] = strings.ReplaceAll(kv, PortPlaceholder, strconv.Itoa(port))
	}
	// the arguments may hold secrets, as cmd's may: log the program only
	e.log.Info("stopping engine with stop_cmd", zap.String("program", argv[0]), zap.Int("pid", proc.pid()))
	t := e.clock.NewTimer(grace)
	defer t.Stop()
	sc, err := spawn(argv, e.cfg.Dir, env, &e.lines, e.log.With(zap.String("source", "stop_cmd")))
	if err != nil {
		e.log.Error("stop_cmd could not start: sending SIGTERM", zap.Error(err))
		return false
	}
	expired := false
	defer func() { e.endStopCmd(sc, t, expired) }()
	cmdDone := sc.done
	for {
		select {
		case <-proc.done:
			return true
		case <-cmdDone:
			cmdDone = nil
			if sc.err != nil {
				e.log.Error("stop_cmd failed: sending SIGTERM", zap.String("reason", sc.exitReason()),
					zap.Strings("last_lines", e.lines.last(5)))
				return false
			}
		case <-t.C():
			expired = true
			e.log.Warn("engine still running stop_timeout after stop_cmd: sending SIGTERM",
				zap.Int("pid", proc.pid()), zap.Duration("stop_timeout", grace))
			return false
		}
	}
}

// endStopCmd waits for the stop command until t fires (at once if it has
// fired), then kills what is left of it, and reads the rest of its output.
func (e *Engine) endStopCmd(sc *process, t clock.Timer, expired bool) {
	if !expired {
		select {
		case <-sc.done:
		case <-t.C():
		}
	}
	if !sc.exited() {
		e.log.Warn("stop_cmd still running at stop_timeout: killing it", zap.Int("pid", sc.pid()))
		killGroup(sc.pid())
		<-sc.done
	}
	sc.output.Wait()
}

// stopArgv is the stop command with {engine.pid} and {engine.port} filled in.
func (e *Engine) stopArgv(pid, port int) []string {
	r := strings.NewReplacer(PIDPlaceholder, strconv.Itoa(pid), PortPlaceholder, strconv.Itoa(port))
	argv := make([]string, len(e.cfg.StopCmd))
	for i, a := range e.cfg.StopCmd {
		argv[i] = r.Replace(a)
	}
	return argv
}
