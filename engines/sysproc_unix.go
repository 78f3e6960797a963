//go:build unix && !linux

package engines

import "syscall"

// sysProcAttr puts the engine in its own process group so that stopping it
// reaches its children.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
