package harden

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func process() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the agent not dumpable: %w", err)
	}
	return nil
}

func dumpable() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return err != nil || v != 0
}
