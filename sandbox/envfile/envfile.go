// Package envfile is the sandbox's env file: the JSON object of the env
// values the user submits (and those saved for the session's
// configuration), kept 0600 and written atomically, from which the agent
// reads single keys.
package envfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"syscall"

	"github.com/remote-agents/remote-agents/sandbox/safefile"
)

// Merge merges values into the JSON env file at path (created 0600), written
// atomically (safefile), and returns the merged values. Keys it holds that
// values does not name are kept. Anything but a regular file at path (a link
// planted in a shared /tmp) is refused and left alone.
func Merge(path string, values map[string]string) (map[string]string, error) {
	cur, err := Read(path)
	if err != nil {
		return nil, err
	}
	maps.Copy(cur, values)
	out, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode env file: %w", err)
	}
	return cur, safefile.Write(path, out, 0o600)
}

// Read reads the env file at path (none: empty), without following a link,
// and makes it 0600 whatever it was: it holds secrets, and the rewrite keeps
// its mode.
func Read(path string) (map[string]string, error) {
	cur := map[string]string{}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return cur, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("env file %s is not a regular file", path)
	case err != nil:
		return nil, fmt.Errorf("env file: %w", err)
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("env file %s is not a regular file", path)
	}
	if err := json.NewDecoder(f).Decode(&cur); err != nil {
		return nil, fmt.Errorf("env file %s is damaged: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return nil, fmt.Errorf("env file: %w", err)
	}
	if cur == nil { // the file held null
		cur = map[string]string{}
	}
	return cur, nil
}
