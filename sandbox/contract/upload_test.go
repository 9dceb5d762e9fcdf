package contract

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestArchiveKeepsTheWorkspaceButNotTheAgentsState(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"main.go":                          "package main",
		"web/index.html":                   "<html>",
		".agent/memory.json":               "{}",
		".proliferate_env.json":            `{"KEY":"secret"}`,
		".proliferate/.verification/a.txt": "ok",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	o := Options{EnvFile: filepath.Join(dir, ".proliferate_env.json")}
	n, err := archive(t.Context(), &buf, dir, o.private(dir))
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("archive: %d %v (buffer %d)", n, err, buf.Len())
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	contents := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			contents[h.Name] = string(b)
		}
		if h.Name == "passwd" && (h.Typeflag != tar.TypeSymlink || h.Linkname != "/etc/passwd") {
			t.Errorf("symlink archived as %v -> %q", h.Typeflag, h.Linkname)
		}
	}
	for _, want := range []string{"main.go", "web/index.html", ".proliferate/.verification/a.txt", "passwd"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from %v", want, names)
		}
	}
	for _, not := range []string{".agent", ".agent/memory.json", ".proliferate_env.json"} {
		if slices.Contains(names, not) {
			t.Errorf("%s archived", not)
		}
	}
	if contents["main.go"] != "package main" || contents["passwd"] != "" {
		t.Errorf("contents %v", contents)
	}
}
