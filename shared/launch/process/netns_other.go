//go:build !linux

package process

import (
	"errors"
	"net"
)

type netns struct{}

func newNetns([]string) (*netns, []net.Listener, error) {
	return nil, nil, errors.New("process launcher: cutting a sandbox off from the network needs Linux")
}

func (*netns) run(func() error) error { return errors.New("no network namespace") }

func (*netns) close() {}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// CanIsolate reports whether this process can cut sandboxes off from the
// network: never, but on Linux.
func CanIsolate() error {
	return errors.New("process launcher: cutting a sandbox off from the network needs Linux")
}
