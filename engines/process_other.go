//go:build !unix

package engines

import (
	"os/exec"
	"syscall"
)

// canStartProcesses is false where the gateway has no way to stop an
// engine's whole process tree (Windows has job objects, which this package
// does not use yet): a `cmd` engine is refused at load (Config.Validate)
// rather than started and then leaked, or half-stopped. Remote engines work.
var canStartProcesses = false

// The functions below are never called, since no process is started; they
// keep process.go platform-neutral.

func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminateGroup(pid int) { killGroup(pid) }

func killGroup(int) {}

func killedBy(*exec.ExitError) string { return "" }
