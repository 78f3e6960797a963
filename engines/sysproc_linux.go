package engines

import "syscall"

// sysProcAttr puts the engine in its own process group (so that stopping it
// reaches its children) and asks the kernel to kill it if Caddy dies without
// a chance to clean up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
