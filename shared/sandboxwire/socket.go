package sandboxwire

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// A sandbox serves envd on a Unix socket in its folder, whose path may be
// longer than a socket address holds (108 bytes on Linux): such a path is
// reached through its folder's file descriptor (/proc/self/fd/N/name),
// which resolves to the same socket.

// maxPath is the longest path a socket address holds (sun_path, with its
// terminating NUL).
const maxSocketPath = 107

// ListenSocket listens on the Unix socket at path (of any length: see
// within), replacing one a past run left,
// open to this process's user only.
func ListenSocket(path string) (net.Listener, error) {
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

// DialSocket connects to the Unix socket at path (of any length).
func DialSocket(ctx context.Context, path string) (net.Conn, error) {
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
	if len(path) <= maxSocketPath {
		return f(path)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	return f("/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + filepath.Base(path))
}
