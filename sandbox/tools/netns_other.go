//go:build !linux

package tools

import (
	"errors"
	"syscall"
)

var errNoNetns = errors.New("network namespaces are Linux's")

func isolateNetwork(*syscall.SysProcAttr) error { return errNoNetns }

// NetworkIsolation reports whether commands can run without network here:
// never outside Linux.
func NetworkIsolation() error { return errNoNetns }
