// Package jobspace is an orchestrator job's directory in its sandbox:
// <root>/{job_id}/{input,work,output,memory,logs} (root /agent-space in the
// image). Layout makes it and writes the job's inputData to input/ (input.json,
// and the files inputData.files maps paths to), then makes input/ read-only;
// Seal makes output/ read-only after the run and Outputs lists its files for
// upload. Policy is the security policy of the job's tools: they read only
// inside the job directory and write only under work/ and output/.
package jobspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// The job directory's folders (sandboxwire.JobDirs).
const (
	Input  = "input"
	Work   = "work"
	Output = "output"
	Memory = "memory"
	Logs   = "logs"
	// InputFile is the job's whole inputData, in input/.
	InputFile = sandboxwire.JobInputName
)

// DefaultRoot is the job root in the image.
const DefaultRoot = "/agent-space"

// Limits of a job's input files and outputs.
const (
	// MaxInputFiles bounds the files of inputData.files; MaxInputFileBytes
	// one of them; MaxInputBytes them all and input.json.
	MaxInputFiles     = sandboxwire.MaxJobInputFiles
	MaxInputFileBytes = sandboxwire.MaxJobInputFileBytes
	MaxInputBytes     = sandboxwire.MaxJobInputBytes
	// MaxOutputs bounds the files output/ may hold (one more upload is the
	// log); MaxOutputBytes one of them, MaxOutputsBytes them all.
	MaxOutputs      = sandboxwire.MaxUploadFiles - 1
	MaxOutputBytes  = sandboxwire.MaxEvidenceBytes
	MaxOutputsBytes = 1 << 30
)

// jobID is what a job id may be: a UUID, or letters, digits, - and _.
var jobID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ValidJobID reports whether id can name a job directory.
func ValidJobID(id string) bool { return jobID.MatchString(id) }

// Dir is a laid-out job directory.
type Dir struct {
	// Path is the job directory, absolute: <root>/{job_id}.
	Path string
	// InputFiles are the files written to input/ besides input.json,
	// relative to input/, sorted.
	InputFiles []string
}

// Sub returns the absolute path of one of the job directory's folders.
func (d Dir) Sub(name string) string { return filepath.Join(d.Path, name) }

// Layout makes the job directory of job id under root (which it creates if
// needed), writes input to input/input.json and, when input's "files" member
// is an object of relative path → string content, each as a file under
// input/, then makes input/ read-only (files 0444, folders 0555). A directory
// already there is refused: a job's sandbox is never reused. Paths are
// checked: relative, clean, no "..", no absolute path, bounded in number,
// depth and size.
func Layout(root, id string, input json.RawMessage) (Dir, error) {
	if !ValidJobID(id) {
		return Dir{}, fmt.Errorf("job id %q cannot name a directory", id)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return Dir{}, fmt.Errorf("job root: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Dir{}, fmt.Errorf("job root: %w", err)
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	files, err := sandboxwire.JobInputFiles(input)
	if err != nil {
		return Dir{}, err
	}
	d := Dir{Path: filepath.Join(root, id)}
	if err := os.Mkdir(d.Path, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Dir{}, fmt.Errorf("job directory %s exists already: a job's sandbox is never reused", id)
		}
		return Dir{}, fmt.Errorf("job directory: %w", err)
	}
	for _, sub := range sandboxwire.JobDirs {
		perm := os.FileMode(0o755)
		if sub == Memory || sub == Logs {
			perm = 0o700 // the agent's own, not its commands'
		}
		if err := os.Mkdir(d.Sub(sub), perm); err != nil {
			return Dir{}, fmt.Errorf("job directory: %w", err)
		}
	}
	r, err := os.OpenRoot(d.Sub(Input))
	if err != nil {
		return Dir{}, fmt.Errorf("input: %w", err)
	}
	defer func() { _ = r.Close() }()
	if err := writeIn(r, InputFile, input); err != nil {
		return Dir{}, err
	}
	for _, f := range files {
		if dir := path.Dir(f.Path); dir != "." {
			if err := r.MkdirAll(dir, 0o755); err != nil {
				return Dir{}, fmt.Errorf("input file %s: %w", f.Path, err)
			}
		}
		if err := writeIn(r, f.Path, []byte(f.Content)); err != nil {
			return Dir{}, err
		}
		d.InputFiles = append(d.InputFiles, f.Path)
	}
	sort.Strings(d.InputFiles)
	if err := ReadOnly(d.Sub(Input)); err != nil {
		return Dir{}, fmt.Errorf("input: %w", err)
	}
	return d, nil
}

// writeIn writes a new file inside r.
func writeIn(r *os.Root, name string, data []byte) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("input file %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("input file %s: %w", name, err)
	}
	return f.Close()
}

// CheckRelPath checks a path given for a job's file (sandboxwire.CheckJobPath).
func CheckRelPath(p string) error { return sandboxwire.CheckJobPath(p) }

// ReadOnly makes the tree at dir read-only: files 0444, folders 0555, links
// left as they are (never followed: every change is made inside dir).
// Folders are done after what they hold.
func ReadOnly(dir string) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	return readOnly(r)
}

func readOnly(r *os.Root) error {
	var dirs []string
	err := fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			return r.Chmod(p, 0o444) //nolint:gosec // read-only for everyone is the point: the tools' user reads input/
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := r.Chmod(dirs[i], 0o555); err != nil { //nolint:gosec // as above, folders
			return err
		}
	}
	return nil
}

// Seal makes output/ read-only after the run and, when the agent runs as
// root, its own again (the tools' user can no longer change it): links and
// other special files in it are removed, never followed.
func (d Dir) Seal() error {
	r, err := os.OpenRoot(d.Sub(Output))
	if err != nil {
		return fmt.Errorf("seal output: %w", err)
	}
	defer func() { _ = r.Close() }()
	uid, gid := os.Getuid(), os.Getgid()
	err = fs.WalkDir(r.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && !e.Type().IsRegular() {
			return r.Remove(p) // a link or a device is no output
		}
		if uid == 0 {
			return r.Lchown(p, uid, gid)
		}
		return nil
	})
	if err == nil {
		err = readOnly(r)
	}
	if err != nil {
		return fmt.Errorf("seal output: %w", err)
	}
	return nil
}

// File is one file of output/ (or the log): its path in the job directory
// (output/report.md), size and SHA-256.
type File struct {
	Path   string
	Size   int64
	SHA256 string
}

// OutputCount is how many regular files output/ holds now (at most
// MaxOutputs+1: past that it stops counting), for the job's progress.
func (d Dir) OutputCount() int {
	n := 0
	_ = filepath.WalkDir(d.Sub(Output), func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a file gone meanwhile is not counted
		}
		if e.Type().IsRegular() {
			if n++; n > MaxOutputs {
				return filepath.SkipAll
			}
		}
		return nil
	})
	return n
}

// Outputs lists the regular files under output/, sorted by path, with their
// size and SHA-256, read inside the job directory (links are skipped, never
// followed). More than MaxOutputs files, one larger than MaxOutputBytes or
// more than MaxOutputsBytes in all is an error.
func (d Dir) Outputs() ([]File, error) {
	r, err := os.OpenRoot(d.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	var files []File
	var total int64
	err = fs.WalkDir(r.FS(), Output, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil // folders are walked; links and devices are not outputs
		}
		if len(files) == MaxOutputs {
			return fmt.Errorf("output/ holds more than %d files", MaxOutputs)
		}
		if err := CheckRelPath(strings.TrimPrefix(p, Output+"/")); err != nil {
			return fmt.Errorf("output file: %w", err)
		}
		f, err := d.Hash(r, p)
		if err != nil {
			return err
		}
		if f.Size > MaxOutputBytes {
			return fmt.Errorf("%s is larger than %d bytes", p, int64(MaxOutputBytes))
		}
		if total += f.Size; total > MaxOutputsBytes {
			return fmt.Errorf("output/ holds more than %d bytes", int64(MaxOutputsBytes))
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list outputs: %w", err)
	}
	return files, nil
}

// Hash reads the regular file at p (relative to the job directory, inside r)
// for its size and SHA-256; a link or special file is refused.
func (d Dir) Hash(r *os.Root, p string) (File, error) {
	info, err := r.Lstat(p)
	if err != nil {
		return File{}, err
	}
	if !info.Mode().IsRegular() {
		return File{}, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := r.Open(p)
	if err != nil {
		return File{}, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("read %s: %w", p, err)
	}
	return File{Path: p, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Open opens the regular file at p (relative to the job directory) inside
// the job directory, for upload.
func (d Dir) Open(p string) (*os.File, error) {
	r, err := os.OpenRoot(d.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	info, err := r.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	return r.Open(p)
}

// Policy is the security policy of a job's tools in job directory dir (the
// tools' workspace): the reading tools see the job directory only, write and
// edit only work/ and output/, git only their paths; symlinks are resolved
// before the check, so a link out of the job directory, or into input/ for a
// write, is refused. bash keeps the default refusals; the web tools their
// default rate limit and need allow_domains.
func Policy(dir string) (*policy.Policy, error) {
	f := policy.Defaults()
	all := []string{"$WORKSPACE", "$WORKSPACE/**"}
	writable := []string{"$WORKSPACE/" + Work + "/**", "$WORKSPACE/" + Output + "/**"}
	for _, t := range []string{"read", "glob", "grep", "ls"} {
		f.Tools[t] = policy.Tool{Allow: all}
	}
	for _, t := range []string{"write", "edit"} {
		f.Tools[t] = policy.Tool{Allow: writable}
	}
	f.Tools["git"] = policy.Tool{Allow: append([]string{"$WORKSPACE/" + Work, "$WORKSPACE/" + Output}, writable...)}
	return policy.New(f, dir)
}
