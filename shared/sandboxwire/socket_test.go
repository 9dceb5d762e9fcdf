package sandboxwire

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A socket whose path is longer than a socket address holds is listened on
// and dialled all the same, and is open to its user only.
func TestSocketsOfLongPaths(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{1, 12} {
		dir := filepath.Join(append([]string{t.TempDir()}, strings.Split(strings.Repeat("abcdefghij/", depth), "/")...)...)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "envd.sock")
		ln, err := ListenSocket(path)
		if err != nil {
			t.Fatalf("listen on %d bytes: %v", len(path), err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = c.Write([]byte("hello"))
				_ = c.Close()
			}
		}()
		conn, err := DialSocket(t.Context(), path)
		if err != nil {
			t.Fatalf("dial %d bytes: %v", len(path), err)
		}
		got, _ := io.ReadAll(conn)
		_ = conn.Close()
		_ = ln.Close()
		if string(got) != "hello" {
			t.Errorf("%d bytes: read %q", len(path), got)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%d bytes: mode %v", len(path), fi.Mode().Perm())
		}
	}
}
