package provision

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Limits bound what Extract unpacks: Bytes of file content in at most
// Entries entries (zero: sandboxwire's MaxRestoreBytes and
// MaxRestoreEntries).
type Limits struct {
	Bytes   int64
	Entries int
}

// RefusedError says why an archive was refused: it breaks one of Extract's
// rules. Nothing of it was written.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "the archive was refused: " + e.Reason }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// maxHops bounds the links followed resolving one link's target (Linux's
// own bound).
const maxHops = 40

// kinds of entries, as they will be once the archive is unpacked.
const (
	kindMissing = iota
	kindDir
	kindFile
	kindLink
)

type entry struct {
	kind   int
	target string
}

// Extract unpacks the gzipped tar in f (read twice: checked, then unpacked)
// into dir, safely:
//
//   - every entry's name is relative and clean: no absolute path, no "..";
//   - a symbolic link's target is relative and, followed through the links
//     of the archive and of dir, stays inside dir; no entry lies under a
//     link or a file of the archive; hard links are refused;
//   - at most lim's bytes of content in at most lim's entries;
//   - devices, pipes and sockets are skipped, and so is the platform's own
//     folder (.remote-agent, written afresh for each session).
//
// An archive that breaks a rule is refused (a *RefusedError) before
// anything is written. Otherwise its entries replace what dir holds at
// their names (a link is replaced, never followed), every write stays
// inside dir (os.Root), file modes keep their permission bits only, and
// what is written is given to user. It returns the entries written.
func Extract(f *os.File, dir string, lim Limits, user *toolenv.User) (int, error) {
	if lim.Bytes <= 0 {
		lim.Bytes = sandboxwire.MaxRestoreBytes
	}
	if lim.Entries <= 0 {
		lim.Entries = sandboxwire.MaxRestoreEntries
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer func() { _ = root.Close() }()
	if err := check(f, root, lim); err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return unpack(f, root, user)
}

// walk calls fn for each entry of the gzipped tar r that is to be unpacked,
// with its clean name; it refuses names that are absolute or hold "..".
func walk(r io.Reader, fn func(name string, h *tar.Header, tr *tar.Reader) error) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return refused("it is not a gzipped tar")
	}
	defer func() { _ = gz.Close() }()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return refused("it is not a valid tar (%v)", err)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "." || name == privateDir || strings.HasPrefix(name, privateDir+"/") {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeReg, tar.TypeSymlink:
		case tar.TypeLink:
			return refused("it holds a hard link (%q)", name)
		default:
			continue // devices, pipes: not a workspace's
		}
		if err := fn(name, h, tr); err != nil {
			return err
		}
	}
}

// entryName cleans a tar entry's name; absolute names and names with a ".."
// segment are refused.
func entryName(raw string) (string, error) {
	if strings.ContainsRune(raw, 0) || raw == "" {
		return "", refused("it holds an entry without a usable name")
	}
	if strings.HasPrefix(raw, "/") {
		return "", refused("it holds an absolute path (%q)", raw)
	}
	if slices.Contains(strings.Split(raw, "/"), "..") {
		return "", refused("it holds a path with '..' (%q)", raw)
	}
	return path.Clean(raw), nil
}

// check reads the archive once, without writing, and refuses it if it breaks
// a rule.
func check(r io.Reader, root *os.Root, lim Limits) error {
	entries := map[string]entry{}
	var order []string
	var total int64
	err := walk(r, func(name string, h *tar.Header, _ *tar.Reader) error {
		if len(order) >= lim.Entries {
			return refused("it holds more than %d entries", lim.Entries)
		}
		e := entry{kind: kindDir}
		switch h.Typeflag {
		case tar.TypeReg:
			e.kind = kindFile
			if h.Size < 0 || h.Size > lim.Bytes-total {
				return refused("it unpacks to more than %d bytes", lim.Bytes)
			}
			total += h.Size
		case tar.TypeSymlink:
			e = entry{kind: kindLink, target: h.Linkname}
		}
		entries[name] = e
		order = append(order, name)
		return nil
	})
	if err != nil {
		return err
	}
	// Nothing lies under a link or a file of the archive; the folders above
	// its entries will be folders.
	for _, name := range order {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			e, ok := entries[dir]
			if ok && e.kind != kindDir {
				return refused("%q lies under a link or a file of the archive", name)
			}
			if !ok {
				entries[dir] = entry{kind: kindDir}
			}
		}
	}
	v := &view{entries: entries, root: root}
	for _, name := range order {
		e := entries[name]
		if e.kind != kindLink {
			continue
		}
		hops := 0
		dir := []string{}
		if d := path.Dir(name); d != "." {
			dir = strings.Split(d, "/")
		}
		if _, out := v.resolve(dir, e.target, &hops); out {
			return refused("the link %q leads out of the workspace", name)
		}
	}
	return nil
}

// view is the workspace as it will be once the archive is unpacked: the
// archive's entries, else what the workspace holds now.
type view struct {
	entries map[string]entry
	root    *os.Root
}

func (v *view) lookup(p string) entry {
	if e, ok := v.entries[p]; ok {
		return e
	}
	info, err := v.root.Lstat(p)
	switch {
	case err != nil:
		return entry{kind: kindMissing}
	case info.Mode()&fs.ModeSymlink != 0:
		t, err := v.root.Readlink(p)
		if err != nil {
			return entry{kind: kindMissing}
		}
		return entry{kind: kindLink, target: t}
	case info.IsDir():
		return entry{kind: kindDir}
	}
	return entry{kind: kindFile}
}

// resolve follows target from the folder dir (segments under the
// workspace), through links, and reports where it leads and whether it
// leaves the workspace. Past a missing name or a file it goes on by the
// names alone.
func (v *view) resolve(dir []string, target string, hops *int) ([]string, bool) {
	if strings.HasPrefix(target, "/") || target == "" {
		return nil, true
	}
	cur := slices.Clone(dir)
	for _, part := range strings.Split(target, "/") {
		switch part {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, true
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, part)
		e := v.lookup(strings.Join(cur, "/"))
		if e.kind != kindLink {
			continue
		}
		if *hops++; *hops > maxHops {
			return nil, true
		}
		next, out := v.resolve(cur[:len(cur)-1], e.target, hops)
		if out {
			return nil, true
		}
		cur = next
	}
	return cur, false
}

// unpack writes the checked archive's entries into root.
func unpack(r io.Reader, root *os.Root, user *toolenv.User) (int, error) {
	n := 0
	own := func(name string) error {
		if user == nil {
			return nil
		}
		return root.Lchown(name, int(user.UID), int(user.GID))
	}
	err := walk(r, func(name string, h *tar.Header, tr *tar.Reader) error {
		if err := parents(root, name, own); err != nil {
			return err
		}
		perm := fs.FileMode(h.Mode & 0o777) //nolint:gosec // nine permission bits: no overflow
		info, lerr := root.Lstat(name)
		exists := lerr == nil
		switch h.Typeflag {
		case tar.TypeDir:
			if exists && !info.IsDir() {
				if err := root.Remove(name); err != nil {
					return err
				}
				exists = false
			}
			if !exists {
				if err := root.Mkdir(name, perm|0o700); err != nil {
					return err
				}
			} else if err := root.Chmod(name, perm|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if exists {
				if err := root.RemoveAll(name); err != nil {
					return err
				}
			}
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			if err != nil {
				return err
			}
			_, err = io.CopyN(out, tr, h.Size)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			if !h.ModTime.IsZero() {
				_ = root.Chtimes(name, time.Now(), h.ModTime)
			}
		case tar.TypeSymlink:
			if exists {
				if err := root.RemoveAll(name); err != nil {
					return err
				}
			}
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
		}
		n++
		return own(name)
	})
	return n, err
}

// parents makes the folders above name folders: what is missing is made,
// and a link or a file in the way is replaced (never followed).
func parents(root *os.Root, name string, own func(string) error) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		info, err := root.Lstat(dir)
		if err == nil && info.IsDir() {
			continue
		}
		if err == nil {
			if err := root.Remove(dir); err != nil {
				return err
			}
		}
		if err := root.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if err := own(dir); err != nil {
			return err
		}
	}
	return nil
}
