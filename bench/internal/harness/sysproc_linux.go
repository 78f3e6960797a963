//go:build unix

package harness

import "syscall"

// childAttr puts a child in its own process group and kills it if the
// benchmark dies without stopping it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
