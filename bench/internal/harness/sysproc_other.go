//go:build unix && !linux

package harness

import "syscall"

// childAttr puts a child in its own process group. (The benchmark measures
// through /proc, so it only runs on Linux; this keeps `go vet` building.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
