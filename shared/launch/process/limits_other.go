//go:build !linux

package process

import (
	"os/exec"

	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// setRlimits holds no limit off Linux: the size is the GOMAXPROCS only.
func setRlimits(int, tasksize.Size) error { return nil }

func writable(string) bool { return false }

func start(build func() *exec.Cmd, _ string) (*exec.Cmd, bool, error) {
	cmd := build()
	return cmd, false, cmd.Start()
}
