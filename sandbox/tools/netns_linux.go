//go:build linux

package tools

import (
	"os/exec"
	"syscall"
)

// isolateNetwork starts the command in a network namespace of its own: no
// interface but a loopback that is down, so nothing it runs reaches a
// network. Creating one takes CAP_SYS_ADMIN (the agent as root, outside a
// container that drops it): the clone happens before the command takes the
// tools' user's credential.
func isolateNetwork(a *syscall.SysProcAttr) error {
	a.Cloneflags |= syscall.CLONE_NEWNET
	return nil
}

// NetworkIsolation reports whether commands can run without network here:
// it starts true in a network namespace of its own.
func NetworkIsolation() error {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	return cmd.Run()
}
