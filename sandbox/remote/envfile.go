package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"syscall"

	"github.com/remote-agents/remote-agents/sandbox/safefile"
)

// mergeEnv merges values into the env file, gives it to the tools' user, and
// puts the file's values into the tools' environment and into what is hidden
// from their output: the user's values are for the workspace's programs, not
// for the events apps and viewers read.
func (r *run) mergeEnv(values map[string]string) error {
	merged, err := mergeEnv(r.c.EnvFile, values)
	if err != nil {
		return err
	}
	if err := r.c.ToolUser.Own(r.c.EnvFile); err != nil {
		return err
	}
	if r.c.Tools != nil {
		r.c.Tools.SetValues(merged)
	}
	r.c.Secrets.Add(slices.Collect(maps.Values(merged))...)
	return nil
}

// MergeEnv merges values into the JSON env file at path (created 0600), written
// atomically (safefile): the agent reads single keys from it. Keys it holds
// that values does not name are kept. Anything but a regular file at path (a
// link planted in a shared /tmp) is refused and left alone.
func MergeEnv(path string, values map[string]string) error {
	_, err := mergeEnv(path, values)
	return err
}

// mergeEnv is MergeEnv, returning the merged values.
func mergeEnv(path string, values map[string]string) (map[string]string, error) {
	cur, err := readEnv(path)
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

// readEnv reads the env file at path (none: empty), without following a link,
// and makes it 0600 whatever it was: it holds secrets, and the rewrite keeps
// its mode.
func readEnv(path string) (map[string]string, error) {
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
