package envfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMergeEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ws", ".proliferate_env.json")
	read := func() (map[string]string, os.FileMode) {
		t.Helper()
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return m, info.Mode().Perm()
	}
	if _, err := Merge(path, map[string]string{"A": "1", "B": "2"}); err != nil {
		t.Fatal(err)
	}
	if m, mode := read(); len(m) != 2 || m["A"] != "1" || mode != 0o600 {
		t.Errorf("new file: %v, %v", m, mode)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(path, map[string]string{"B": "3", "C": "4"}); err != nil {
		t.Fatal(err)
	}
	if m, mode := read(); len(m) != 3 || m["A"] != "1" || m["B"] != "3" || m["C"] != "4" || mode != 0o600 {
		t.Errorf("merged: %v, %v", m, mode)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(path, map[string]string{"D": "5"}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("damaged file: %v", err)
	}
	if err := os.WriteFile(path, []byte("null"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(path, map[string]string{"D": "5"}); err != nil {
		t.Errorf("a file holding null: %v", err)
	}
}

// The env file lives in /tmp, which others may write: a link planted at its
// path is refused, and what it points at stays as it was.
func TestMergeEnvRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.json")
	if err := os.WriteFile(target, []byte(`{"X":"1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ".proliferate_env.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(path, map[string]string{"A": "secret"}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("merge through a link: %v", err)
	}
	raw, _ := os.ReadFile(target)
	info, _ := os.Stat(target)
	if string(raw) != `{"X":"1"}` || info.Mode().Perm() != 0o644 {
		t.Errorf("the link's target changed: %q %v", raw, info.Mode())
	}
	if link, err := os.Lstat(path); err != nil || link.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", link, err)
	}
}
