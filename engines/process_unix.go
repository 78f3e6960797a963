//go:build unix

package engines

import (
	"os/exec"
	"syscall"
)

// canStartProcesses: on Unix an engine's command runs in a process group
// that the gateway signals as a whole.
var canStartProcesses = true

// terminateGroup asks every process of the group to stop (SIGTERM).
func terminateGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGTERM) }

// killGroup ends every process of the group (SIGKILL).
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// killedBy names the signal that ended the process, or "".
func killedBy(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
