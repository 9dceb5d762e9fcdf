package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/safefile"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
)

// Limits of the file tools.
const (
	maxReadBytes   = 256 * 1024
	maxWriteBytes  = 1 << 20
	maxListEntries = 1000
	maxMatches     = 200
	maxGrepFile    = 2 << 20
)

// fileTools are the workspace's file tools, each confined to the paths p allows.
func fileTools(p *policy.Policy, u *toolenv.User) []Tool {
	return []Tool{readTool(p), writeTool(p, u), editTool(p, u), globTool(p), grepTool(p), lsTool(p)}
}

// readTool reads a text file, numbered by line.
func readTool(p *policy.Policy) Tool {
	return Tool{
		Name:        "read",
		Description: "Read a text file of the workspace. Returns its content, numbered by line from offset.",
		Schema: `{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","minLength":1,"maxLength":4096,"description":"file path, relative to the workspace"},
			"offset":{"type":"integer","minimum":1,"description":"first line to return (default 1)"},
			"limit":{"type":"integer","minimum":1,"maximum":10000,"description":"how many lines (default all, up to 256 KiB)"}}}`,
		Run: func(_ context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct {
				Path          string
				Offset, Limit int
			}](raw)
			if err != nil {
				return "", err
			}
			path, err := p.CheckPath("read", a.Path)
			if err != nil {
				return "", err
			}
			return readLines(p, path, a.Offset, a.Limit)
		},
	}
}

// writeTool writes a file, creating its folders.
func writeTool(p *policy.Policy, u *toolenv.User) Tool {
	return Tool{
		Name:        "write",
		Description: "Write a file of the workspace, creating parent folders and replacing any content.",
		Schema: `{"type":"object","additionalProperties":false,"required":["path","content"],"properties":{
			"path":{"type":"string","minLength":1,"maxLength":4096},
			"content":{"type":"string","maxLength":1048576}}}`,
		Run: func(_ context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct{ Path, Content string }](raw)
			if err != nil {
				return "", err
			}
			path, err := p.CheckPath("write", a.Path)
			if err != nil {
				return "", err
			}
			if err := writeFile(u, path, []byte(a.Content)); err != nil {
				return "", err
			}
			return fmt.Sprintf("wrote %d bytes to %s", len(a.Content), rel(p, path)), nil
		},
	}
}

// editTool replaces exact text in a file.
func editTool(p *policy.Policy, u *toolenv.User) Tool {
	return Tool{
		Name:        "edit",
		Description: "Replace exact text in a file. The old text must occur exactly once unless replace_all is set.",
		Schema: `{"type":"object","additionalProperties":false,"required":["path","old","new"],"properties":{
			"path":{"type":"string","minLength":1,"maxLength":4096},
			"old":{"type":"string","minLength":1,"maxLength":1048576},
			"new":{"type":"string","maxLength":1048576},
			"replace_all":{"type":"boolean"}}}`,
		Run: func(_ context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct {
				Path, Old, New string
				ReplaceAll     bool `json:"replace_all"`
			}](raw)
			if err != nil {
				return "", err
			}
			path, err := p.CheckPath("edit", a.Path)
			if err != nil {
				return "", err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return "", fileErr(p, path, err)
			}
			n := strings.Count(string(data), a.Old)
			switch {
			case n == 0:
				return "", fmt.Errorf("the text to replace was not found in %s", rel(p, path))
			case n > 1 && !a.ReplaceAll:
				return "", fmt.Errorf("the text to replace occurs %d times in %s: give more context or set replace_all", n, rel(p, path))
			}
			out := strings.Replace(string(data), a.Old, a.New, map[bool]int{true: -1, false: 1}[a.ReplaceAll])
			if err := writeFile(u, path, []byte(out)); err != nil {
				return "", err
			}
			return fmt.Sprintf("replaced %d occurrence(s) in %s", map[bool]int{true: n, false: 1}[a.ReplaceAll], rel(p, path)), nil
		},
	}
}

// globTool lists files matching a pattern.
func globTool(p *policy.Policy) Tool {
	return Tool{
		Name:        "glob",
		Description: "Find workspace files whose paths match a pattern: * within a folder name, ** across folders (e.g. src/**/*.go).",
		Schema: `{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","minLength":1,"maxLength":1024}}}`,
		Run: func(_ context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct{ Pattern string }](raw)
			if err != nil {
				return "", err
			}
			pattern := a.Pattern
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(p.Workspace(), pattern)
			}
			var found []string
			err = walk(p, "glob", p.Workspace(), func(path string, _ fs.DirEntry) error {
				if policy.MatchPath(pattern, path) {
					found = append(found, rel(p, path))
				}
				if len(found) >= maxListEntries {
					return errFull
				}
				return nil
			})
			if err != nil && !errors.Is(err, errFull) {
				return "", err
			}
			if len(found) == 0 {
				return "no files match " + a.Pattern, nil
			}
			sort.Strings(found)
			return strings.Join(found, "\n"), nil
		},
	}
}

// grepTool searches files for a regular expression.
func grepTool(p *policy.Policy) Tool {
	return Tool{
		Name:        "grep",
		Description: "Search file contents with a regular expression, in a file or under a folder. Returns path:line: text, with context lines if asked.",
		Schema: `{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","minLength":1,"maxLength":1024,"description":"RE2 regular expression"},
			"path":{"type":"string","maxLength":4096,"description":"file or folder (default the workspace)"},
			"context":{"type":"integer","minimum":0,"maximum":10}}}`,
		Run: func(ctx context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct {
				Pattern, Path string
				Context       int
			}](raw)
			if err != nil {
				return "", err
			}
			re, err := regexp.Compile(a.Pattern)
			if err != nil {
				return "", fmt.Errorf("invalid regular expression: %w", err)
			}
			if a.Path == "" {
				a.Path = "."
			}
			root, err := p.CheckPath("grep", a.Path)
			if err != nil {
				return "", err
			}
			return grep(ctx, p, re, root, a.Context)
		},
	}
}

// lsTool lists a folder.
func lsTool(p *policy.Policy) Tool {
	return Tool{
		Name:        "ls",
		Description: "List a workspace folder: one entry per line with its type and size.",
		Schema: `{"type":"object","additionalProperties":false,"properties":{
			"path":{"type":"string","maxLength":4096,"description":"folder (default the workspace)"}}}`,
		Run: func(_ context.Context, raw json.RawMessage) (string, error) {
			a, err := decode[struct{ Path string }](raw)
			if err != nil {
				return "", err
			}
			if a.Path == "" {
				a.Path = "."
			}
			dir, err := p.CheckPath("ls", a.Path)
			if err != nil {
				return "", err
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				return "", fileErr(p, dir, err)
			}
			var b strings.Builder
			for i, e := range entries {
				if i == maxListEntries {
					fmt.Fprintf(&b, "… %d more\n", len(entries)-i)
					break
				}
				kind, size := "file", int64(0)
				if info, err := e.Info(); err == nil {
					size = info.Size()
				}
				switch {
				case e.Type()&fs.ModeSymlink != 0:
					kind = "link"
				case e.IsDir():
					kind = "dir"
				}
				fmt.Fprintf(&b, "%-4s %10d  %s\n", kind, size, e.Name())
			}
			if len(entries) == 0 {
				return rel(p, dir) + " is empty", nil
			}
			return b.String(), nil
		},
	}
}

var errFull = errors.New("enough results")

// walk visits the files under root that the policy lets tool see, without
// following symlinks out of them.
func walk(p *policy.Policy, tool, root string, visit func(string, fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable entries are skipped
		}
		if d.IsDir() && path != root && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if _, err := p.CheckPath(tool, path); err != nil {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		return visit(path, d)
	})
}

func grep(ctx context.Context, p *policy.Policy, re *regexp.Regexp, root string, context int) (string, error) {
	var b strings.Builder
	matches := 0
	err := walk(p, "grep", root, func(path string, d fs.DirEntry) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if info, err := d.Info(); err != nil || info.Size() > maxGrepFile {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || !isText(data) {
			return nil
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			if !re.MatchString(line) {
				continue
			}
			for j := max(0, i-context); j <= min(len(lines)-1, i+context); j++ {
				sep := "-"
				if j == i {
					sep = ":"
				}
				fmt.Fprintf(&b, "%s%s%d%s %s\n", rel(p, path), sep, j+1, sep, lines[j])
			}
			matches++
			if matches >= maxMatches {
				return errFull
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFull) {
		return "", err
	}
	if matches == 0 {
		return "no matches", nil
	}
	if matches >= maxMatches {
		fmt.Fprintf(&b, "(stopped at %d matches)\n", maxMatches)
	}
	return b.String(), nil
}

func readLines(p *policy.Policy, path string, offset, limit int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fileErr(p, path, err)
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err == nil && info.IsDir() {
		return "", fmt.Errorf("%s is a folder: use ls", filepath.Base(path))
	}
	if offset < 1 {
		offset = 1
	}
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), maxReadBytes)
	n := 0
	for line := 1; sc.Scan(); line++ {
		if line < offset {
			continue
		}
		if limit > 0 && n >= limit {
			break
		}
		if !utf8.Valid(sc.Bytes()) || bytes.IndexByte(sc.Bytes(), 0) >= 0 {
			return "", fmt.Errorf("%s is not a text file", filepath.Base(path))
		}
		if b.Len()+len(sc.Bytes()) > maxReadBytes {
			fmt.Fprintf(&b, "… (truncated at %d KiB; read on with offset %d)\n", maxReadBytes/1024, line)
			break
		}
		fmt.Fprintf(&b, "%6d\t%s\n", line, sc.Text())
		n++
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if b.Len() == 0 {
		return "(empty)", nil
	}
	return b.String(), nil
}

// writeFile writes a tool's file atomically, within the size limit, and gives
// it, and the folders it created for it, to the tools' user u (if any): its
// commands work on what the file tools wrote.
func writeFile(u *toolenv.User, path string, data []byte) error {
	if len(data) > maxWriteBytes {
		return fmt.Errorf("content larger than %d bytes", maxWriteBytes)
	}
	existed := toolenv.FirstExisting(filepath.Dir(path))
	if err := safefile.Write(path, data, 0o644); err != nil {
		return err
	}
	return u.OwnCreated(existed, path)
}

func isText(data []byte) bool {
	head := data[:min(len(data), 8000)]
	return bytes.IndexByte(head, 0) < 0 && utf8.Valid(head[:max(0, len(head)-4)])
}

func rel(p *policy.Policy, path string) string {
	if r, err := filepath.Rel(p.Workspace(), path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func fileErr(p *policy.Policy, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist", rel(p, path))
	}
	return fmt.Errorf("%s: %w", rel(p, path), err)
}
