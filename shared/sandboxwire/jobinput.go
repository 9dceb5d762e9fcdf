package sandboxwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// A job's input: inputData, written whole to input/input.json, and, when its
// "files" member is an object of strings, each of them as a file of input/
// (path → content). The platform checks them at create, the sandbox again
// before it writes them.
const (
	// JobInputName is the file in input/ that holds the whole inputData.
	JobInputName = "input.json"
	// MaxJobInputFiles bounds the files of inputData.files;
	// MaxJobInputFileBytes one of them; MaxJobInputBytes them all and
	// input.json.
	MaxJobInputFiles     = 200
	MaxJobInputFileBytes = 4 << 20
	MaxJobInputBytes     = 16 << 20
	// maxJobPathDepth bounds the folders of a job file's path.
	maxJobPathDepth = 16
	// jobOutputDir is the folder of a job's outputs, whose paths are
	// checked the same way.
	jobOutputDir = "output"
)

// JobInputFile is a file of inputData.files.
type JobInputFile struct{ Path, Content string }

// JobInputFiles are the files inputData.files names, checked and sorted by
// path; none when input has no files member or it is not an object of
// strings (then it is data, in input.json only).
func JobInputFiles(input []byte) ([]JobInputFile, error) {
	if len(input) > MaxJobInputBytes {
		return nil, fmt.Errorf("inputData is larger than %d bytes", MaxJobInputBytes)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(input, &top); err != nil {
		return nil, errors.New("inputData is not a JSON object")
	}
	raw, ok := top["files"]
	if !ok {
		return nil, nil
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return nil, nil // not path → content: it stays data, in input.json only
	}
	if len(files) > MaxJobInputFiles {
		return nil, fmt.Errorf("inputData.files has %d files, more than %d", len(files), MaxJobInputFiles)
	}
	out := make([]JobInputFile, 0, len(files))
	total := 0
	seen := map[string]bool{JobInputName: true}
	for p, content := range files {
		if err := CheckJobPath(p); err != nil {
			return nil, fmt.Errorf("inputData.files: %w", err)
		}
		if len(content) > MaxJobInputFileBytes {
			return nil, fmt.Errorf("inputData.files: %s is larger than %d bytes", p, MaxJobInputFileBytes)
		}
		if seen[p] {
			return nil, fmt.Errorf("inputData.files: %s is taken", p)
		}
		seen[p] = true
		total += len(content)
		out = append(out, JobInputFile{Path: p, Content: content})
	}
	if total > MaxJobInputBytes {
		return nil, fmt.Errorf("inputData.files hold more than %d bytes", MaxJobInputBytes)
	}
	// A file and a folder of the same name cannot both be.
	for _, f := range out {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return nil, fmt.Errorf("inputData.files: %s is both a file and a folder", dir)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// CheckJobPath checks a path given for a job's file (an input file, an
// output): relative, clean, with '/' separators, no "." or ".." segment, no
// control character, at most MaxUploadPathBytes - len("output/") bytes and
// maxJobPathDepth folders deep.
func CheckJobPath(p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case !utf8.ValidString(p):
		return errors.New("a path that is not UTF-8")
	case strings.HasPrefix(p, "/") || strings.Contains(p, `\`):
		return fmt.Errorf("%q is not a relative path", p)
	case len(p) > MaxUploadPathBytes-len(jobOutputDir)-1:
		return fmt.Errorf("%q is too long", p)
	}
	segs := strings.Split(p, "/")
	if len(segs) > maxJobPathDepth {
		return fmt.Errorf("%q is too deep", p)
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("%q is not a clean relative path", p)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q holds a control character", p)
		}
	}
	return nil
}
