package provision_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/provision"
)

// ent is one tar entry: a file (body), a folder (dir) or a link (link,
// hard for a hard link).
type ent struct {
	name, body, link string
	dir, hard        bool
}

// tarball writes a gzipped tar of entries to a file and opens it.
func tarball(t *testing.T, entries ...ent) *os.File {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.hard:
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.link, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snapshot.tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// A workspace's archive comes back: folders, files with their modes, links
// inside the workspace (through folders and other links); what the
// workspace held at an entry's name is replaced (a link by a file, never
// followed); the platform's folder is left as it is.
func TestExtractRestoresTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "victim")
	if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The workspace holds a link out at a name the archive has a file for.
	if err := os.Symlink(target, filepath.Join(ws, "config.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".remote-agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := tarball(t,
		ent{name: "src/", dir: true},
		ent{name: "src/main.go", body: "package main\n"},
		ent{name: "./config.txt", body: "restored"},
		ent{name: "node_modules/.bin/", dir: true},
		ent{name: "node_modules/pkg/bin/run", body: "#!/bin/sh\n"},
		ent{name: "node_modules/.bin/run", link: "../pkg/bin/run"},
		ent{name: "latest", link: "src"},
		ent{name: "main", link: "latest/main.go"},
		ent{name: ".remote-agent/task.json", body: "{}"},
	)
	n, err := provision.Extract(f, ws, provision.Limits{}, nil)
	if err != nil || n != 8 {
		t.Fatalf("Extract = %d, %v", n, err)
	}
	for name, want := range map[string]string{"src/main.go": "package main\n", "config.txt": "restored", "node_modules/.bin/run": "#!/bin/sh\n", "main": "package main\n"} {
		if got, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v", name, got, err)
		}
	}
	if got, _ := os.ReadFile(target); string(got) != "untouched" {
		t.Errorf("a link in the workspace was followed out: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, ".remote-agent", "task.json")); !os.IsNotExist(err) {
		t.Errorf("the platform's folder was restored: %v", err)
	}
}

// An archive that breaks a rule is refused, and nothing of it is written.
func TestExtractRefusesHostileArchives(t *testing.T) {
	ok := ent{name: "first.txt", body: "written first"}
	for _, tc := range []struct {
		name    string
		entries []ent
		lim     provision.Limits
		reason  string
	}{
		{"dot-dot", []ent{ok, {name: "../escape.txt", body: "x"}}, provision.Limits{}, "'..'"},
		{"dot-dot inside", []ent{ok, {name: "a/../../escape.txt", body: "x"}}, provision.Limits{}, "'..'"},
		{"absolute path", []ent{ok, {name: "/tmp/escape.txt", body: "x"}}, provision.Limits{}, "absolute path"},
		{"absolute link", []ent{ok, {name: "etc", link: "/etc"}}, provision.Limits{}, "leads out"},
		{"link up", []ent{ok, {name: "a/up", link: "../../x"}}, provision.Limits{}, "leads out"},
		{"link out through a link", []ent{ok, {name: "here", link: "."}, {name: "up", link: "here/.."}}, provision.Limits{}, "leads out"},
		{"link loop", []ent{ok, {name: "a", link: "b"}, {name: "b", link: "a/x"}}, provision.Limits{}, "leads out"},
		{"entry under a link", []ent{ok, {name: "l", link: "."}, {name: "l/x.txt", body: "x"}}, provision.Limits{}, "under a link"},
		{"hard link", []ent{ok, {name: "h", link: "first.txt", hard: true}}, provision.Limits{}, "hard link"},
		{"too large", []ent{ok, {name: "big", body: strings.Repeat("x", 100)}}, provision.Limits{Bytes: 64}, "more than 64 bytes"},
		{"too many entries", []ent{ok, {name: "a", body: ""}, {name: "b", body: ""}}, provision.Limits{Entries: 2}, "more than 2 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			_, err := provision.Extract(tarball(t, tc.entries...), ws, tc.lim, nil)
			var no *provision.RefusedError
			if !errors.As(err, &no) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Extract: %v, want refused for %s", err, tc.reason)
			}
			if left, _ := os.ReadDir(ws); len(left) != 0 {
				t.Errorf("a refused archive wrote %v", left)
			}
		})
	}
}

// A link of the archive that leads out through a link the workspace already
// holds is refused too; so is what is no gzipped tar.
func TestExtractFollowsTheWorkspaceLinks(t *testing.T) {
	ws := t.TempDir()
	if err := os.Symlink("/", filepath.Join(ws, "root")); err != nil {
		t.Fatal(err)
	}
	_, err := provision.Extract(tarball(t, ent{name: "passwd", link: "root/etc/passwd"}), ws, provision.Limits{}, nil)
	var no *provision.RefusedError
	if !errors.As(err, &no) {
		t.Errorf("a link out through the workspace's link: %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, []byte("not a tarball"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(junk)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := provision.Extract(f, ws, provision.Limits{}, nil); !errors.As(err, &no) {
		t.Errorf("junk: %v", err)
	}
}

// FuzzExtract: whatever the archive, nothing is written outside the workspace.
func FuzzExtract(f *testing.F) {
	f.Add("a/b", "../c", "x")
	f.Add("/abs", "d", "y")
	f.Fuzz(func(t *testing.T, name, link, body string) {
		parent := t.TempDir()
		ws := filepath.Join(parent, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: link})
		_ = tw.WriteHeader(&tar.Header{Name: name + "/f", Typeflag: tar.TypeReg, Size: int64(len(body)), Mode: 0o644})
		_, _ = tw.Write([]byte(body))
		_ = tw.WriteHeader(&tar.Header{Name: link, Typeflag: tar.TypeReg, Size: int64(len(body)), Mode: 0o644})
		_, _ = tw.Write([]byte(body))
		_ = tw.Close()
		_ = gz.Close()
		path := filepath.Join(parent, "a.tgz")
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = file.Close() }()
		_, _ = provision.Extract(file, ws, provision.Limits{}, nil)
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.Name() != "ws" && e.Name() != "a.tgz" {
				t.Fatalf("written outside the workspace: %s", e.Name())
			}
		}
	})
}
