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
// "files" member is an object, each of its members as a file of input/
// (path → content, a string). The platform checks them at create, the
// sandbox again before it writes them.
const (
	// JobInputName is the file in input/ that holds the whole inputData.
	JobInputName = "input.json"
	// MaxJobInputFiles bounds the files of inputData.files;
	// MaxJobInputFileBytes one of them; MaxJobInputBytes them all and
	// input.json.
	MaxJobInputFiles     = 200
	MaxJobInputFileBytes = 4 << 20
	MaxJobInputBytes     = 16 << 20
	// maxJobPathDepth bounds the folders of a job file's path,
	// maxJobNameBytes each of its names.
	maxJobPathDepth = 16
	maxJobNameBytes = 255
	// jobOutputDir is the folder of a job's outputs, whose paths are
	// checked the same way.
	jobOutputDir = "output"
)

// JobInputFile is a file of inputData.files.
type JobInputFile struct{ Path, Content string }

// JobInputFiles are the files inputData.files names, checked and sorted by
// path; none when input has no files member or it is not an object (then
// it is data, in input.json only). An object whose members are not all
// strings is an error: a file's content is a string.
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
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, nil // not path → content: it stays data, in input.json only
	}
	files := make(map[string]string, len(members))
	for p, v := range members {
		var content string
		if err := json.Unmarshal(v, &content); err != nil {
			return nil, fmt.Errorf("inputData.files: %q is not a string (a file's content)", truncate(p, 64))
		}
		files[p] = content
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
// control character, at most MaxUploadPathBytes - len("output/") bytes,
// maxJobPathDepth folders deep and maxJobNameBytes a name (a file system's
// NAME_MAX).
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
		if len(s) > maxJobNameBytes {
			return fmt.Errorf("%q has a name longer than %d bytes", truncate(p, 64), maxJobNameBytes)
		}
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%q holds a control character", p)
		}
	}
	return nil
}

// truncate is s cut to at most n bytes, on a character's boundary, with
// "…" where it was cut: a name quoted in an error stays short.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
