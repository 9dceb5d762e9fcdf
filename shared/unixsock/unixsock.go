// Package unixsock listens on and dials Unix sockets by paths of any
// length: a socket's path is bounded (108 bytes on Linux), a sandbox's
// folder is not, so a long path is reached through its folder's file
// descriptor (/proc/self/fd/N/name), which resolves to the same socket.
package unixsock

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// maxPath is the longest path a socket address holds (sun_path, with its
// terminating NUL).
const maxPath = 107

// Listen listens on the socket at path, replacing one a past run left,
// open to this process's user only.
func Listen(path string) (net.Listener, error) {
	_ = os.Remove(path)
	var ln net.Listener
	err := within(path, func(addr string) error {
		var err error
		ln, err = net.Listen("unix", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// Dial connects to the socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var conn net.Conn
	err := within(path, func(addr string) error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", addr)
		return err
	})
	return conn, err
}

// within calls f with path, or, when it is too long for a socket address,
// with a short path to the same place through its folder's descriptor
// (held open for f's call).
func within(path string, f func(addr string) error) error {
	if len(path) <= maxPath {
		return f(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	return f("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path))
}
