package jobspace_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/jobspace"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/tools"
)

const jobID = "0f8b7c3e-2a41-4d6e-9b1f-3c5d7e9a1b2c"

func TestLayoutWritesTheInputReadOnly(t *testing.T) {
	root := t.TempDir()
	input := json.RawMessage(`{"question":"why?","files":{"a.txt":"alpha","docs/b.md":"# beta"}}`)
	d, err := jobspace.Layout(root, jobID, input)
	if err != nil {
		t.Fatal(err)
	}
	if d.Path != filepath.Join(root, jobID) || !slices.Equal(d.InputFiles, []string{"a.txt", "docs/b.md"}) {
		t.Errorf("dir %+v", d)
	}
	for _, sub := range []string{"input", "work", "output", "memory", "logs"} {
		if info, err := os.Stat(d.Sub(sub)); err != nil || !info.IsDir() {
			t.Errorf("%s: %v", sub, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(d.Sub("input"), "input.json"))
	if err != nil || string(raw) != string(input) {
		t.Errorf("input.json %q %v", raw, err)
	}
	for p, want := range map[string]string{"a.txt": "alpha", "docs/b.md": "# beta"} {
		got, err := os.ReadFile(filepath.Join(d.Sub("input"), p))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q %v", p, got, err)
		}
	}
	modes := map[string]os.FileMode{"": 0o555, "docs": 0o555, "input.json": 0o444, "a.txt": 0o444, "docs/b.md": 0o444}
	for p, want := range modes {
		info, err := os.Lstat(filepath.Join(d.Sub("input"), p))
		if err != nil || info.Mode().Perm() != want {
			t.Errorf("input/%s mode %v (%v), want %v", p, info.Mode().Perm(), err, want)
		}
	}
	// A job's sandbox is never reused.
	if _, err := jobspace.Layout(root, jobID, input); err == nil || !strings.Contains(err.Error(), "never reused") {
		t.Errorf("second layout: %v", err)
	}
}

func TestLayoutRefusesBadInput(t *testing.T) {
	big := strings.Repeat("x", jobspace.MaxInputFileBytes+1)
	many := map[string]string{}
	for i := range jobspace.MaxInputFiles + 1 {
		many[strings.Repeat("f", 1+i%50)+"/"+string(rune('a'+i%26))+string(rune('a'+i/26))] = "x"
	}
	manyRaw, _ := json.Marshal(map[string]any{"files": many})
	bigRaw, _ := json.Marshal(map[string]any{"files": map[string]string{"big": big}})
	for name, tc := range map[string]struct {
		id    string
		input string
		want  string
	}{
		"dotdot":        {jobID, `{"files":{"../escape":"x"}}`, "not a clean relative path"},
		"inner dotdot":  {jobID, `{"files":{"a/../../escape":"x"}}`, "not a clean relative path"},
		"absolute":      {jobID, `{"files":{"/etc/passwd":"x"}}`, "not a relative path"},
		"backslash":     {jobID, `{"files":{"a\\b":"x"}}`, "not a relative path"},
		"empty segment": {jobID, `{"files":{"a//b":"x"}}`, "not a clean"},
		"control":       {jobID, `{"files":{"a\u0001":"x"}}`, "control character"},
		"input.json":    {jobID, `{"files":{"input.json":"x"}}`, "taken"},
		"file and dir":  {jobID, `{"files":{"a":"x","a/b":"y"}}`, "both a file and a folder"},
		"too many":      {jobID, string(manyRaw), "more than"},
		"too big":       {jobID, string(bigRaw), "larger than"},
		"not an object": {jobID, `[1]`, "not a JSON object"},
		"bad job id":    {"../x", `{}`, "cannot name"},
		"dotted job id": {".hidden", `{}`, "cannot name"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			_, err := jobspace.Layout(root, tc.id, json.RawMessage(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escape")); err == nil {
				t.Error("a file escaped the job directory")
			}
		})
	}
	// files that is not path → content stays data.
	d, err := jobspace.Layout(t.TempDir(), jobID, json.RawMessage(`{"files":["a","b"]}`))
	if err != nil || len(d.InputFiles) != 0 {
		t.Errorf("files as a list: %+v %v", d, err)
	}
}

func TestOutputsAreListedAndSealed(t *testing.T) {
	root := t.TempDir()
	d, err := jobspace.Layout(root, jobID, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	out := d.Sub("output")
	must(t, os.MkdirAll(filepath.Join(out, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(out, "report.md"), []byte("# Report"), 0o644))
	must(t, os.WriteFile(filepath.Join(out, "sub", "data.json"), []byte(`{"n":1}`), 0o644))
	secret := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(secret, []byte("outside"), 0o644))
	must(t, os.Symlink(secret, filepath.Join(out, "link")))
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(out, "dirlink")))
	if err := d.Seal(); err != nil {
		t.Fatal(err)
	}
	files, err := d.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	want := []jobspace.File{
		{Path: "output/report.md", Size: 8, SHA256: sum("# Report")},
		{Path: "output/sub/data.json", Size: 7, SHA256: sum(`{"n":1}`)},
	}
	if !slices.Equal(files, want) {
		t.Errorf("outputs %+v, want %+v", files, want)
	}
	for p, mode := range map[string]os.FileMode{"": 0o555, "sub": 0o555, "report.md": 0o444, "sub/data.json": 0o444} {
		info, err := os.Lstat(filepath.Join(out, p))
		if err != nil || info.Mode().Perm() != mode {
			t.Errorf("output/%s mode %v %v, want %v", p, info.Mode().Perm(), err, mode)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "link")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link out of output/ is still there: %v", err)
	}
	if raw, _ := os.ReadFile(secret); string(raw) != "outside" {
		t.Errorf("sealing touched the link's target: %q", raw)
	}
}

func TestOutputsAreBounded(t *testing.T) {
	d, err := jobspace.Layout(t.TempDir(), jobID, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobspace.MaxOutputs + 1 {
		must(t, os.WriteFile(filepath.Join(d.Sub("output"), "f"+strings.Repeat("x", i%10)+string(rune('a'+i%26))+string(rune('a'+i/26))), nil, 0o644))
	}
	if _, err := d.Outputs(); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("too many outputs: %v", err)
	}
}

// run runs one tool call in job directory d with the job's policy.
func run(t *testing.T, reg *tools.Registry, name, args string) (string, bool) {
	t.Helper()
	res, err := reg.Run(context.Background(), llm.ToolCall{ID: "c", Name: name, Args: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content, res.IsError
}

// TestEscapesAreRefused: the job's tools read only inside the job
// directory and write only work/ and output/, whatever the spelling.
func TestEscapesAreRefused(t *testing.T) {
	root := t.TempDir()
	d, err := jobspace.Layout(root, jobID, json.RawMessage(`{"files":{"a.txt":"alpha"}}`))
	if err != nil {
		t.Fatal(err)
	}
	other, err := jobspace.Layout(root, "other-job", json.RawMessage(`{"secret":"of another job"}`))
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.txt")
	must(t, os.WriteFile(outside, []byte("outside"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(d.Sub("work"), "out-link")))
	must(t, os.Symlink(d.Sub("input"), filepath.Join(d.Sub("work"), "in-link")))
	must(t, os.Symlink(other.Path, filepath.Join(d.Sub("output"), "other-link")))
	pol, err := jobspace.Policy(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.New(pol, tools.Options{Enabled: []string{"read", "write", "edit", "ls", "grep", "glob"}})
	if err != nil {
		t.Fatal(err)
	}
	allowed := []struct{ tool, args, want string }{
		{"read", `{"path":"input/input.json"}`, "alpha"},
		{"read", `{"path":"input/a.txt"}`, "alpha"},
		{"write", `{"path":"work/notes.txt","content":"n"}`, "wrote"},
		{"write", `{"path":"output/sub/result.md","content":"r"}`, "wrote"},
		{"write", `{"path":"` + d.Sub("output") + `/abs.md","content":"r"}`, "wrote"},
		{"edit", `{"path":"work/notes.txt","old":"n","new":"m"}`, "replaced"},
		{"ls", `{"path":"input"}`, "a.txt"},
	}
	for _, tc := range allowed {
		out, isErr := run(t, reg, tc.tool, tc.args)
		if isErr || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s: %q (error %v), want it done", tc.tool, tc.args, out, isErr)
		}
	}
	refused := []struct{ tool, args string }{
		{"write", `{"path":"input/input.json","content":"x"}`},
		{"write", `{"path":"input/new.txt","content":"x"}`},
		{"edit", `{"path":"input/a.txt","old":"alpha","new":"x"}`},
		{"write", `{"path":"memory/x","content":"x"}`},
		{"write", `{"path":"logs/job.log","content":"x"}`},
		{"write", `{"path":"escape.txt","content":"x"}`},
		{"write", `{"path":"work/../input/a.txt","content":"x"}`},
		{"write", `{"path":"work/in-link/a.txt","content":"x"}`},
		{"write", `{"path":"work/out-link","content":"x"}`},
		{"read", `{"path":"../other-job/input/input.json"}`},
		{"read", `{"path":"` + other.Path + `/input/input.json"}`},
		{"read", `{"path":"output/other-link/input/input.json"}`},
		{"read", `{"path":"work/out-link"}`},
		{"read", `{"path":"` + outside + `"}`},
		{"read", `{"path":"/etc/passwd"}`},
		{"read", `{"path":"../../../../etc/passwd"}`},
		{"ls", `{"path":".."}`},
		{"grep", `{"pattern":"another","path":".."}`},
	}
	for _, tc := range refused {
		out, isErr := run(t, reg, tc.tool, tc.args)
		if !isErr || !strings.Contains(out, policy.ErrDenied.Error()) {
			t.Errorf("%s %s: %q (error %v), want it refused by the policy", tc.tool, tc.args, out, isErr)
		}
	}
	// Nothing was changed outside work/ and output/, and nothing seen.
	if raw, _ := os.ReadFile(filepath.Join(d.Sub("input"), "a.txt")); string(raw) != "alpha" {
		t.Errorf("input/a.txt is %q", raw)
	}
	if raw, _ := os.ReadFile(outside); string(raw) != "outside" {
		t.Errorf("the file outside is %q", raw)
	}
	if out, _ := run(t, reg, "grep", `{"pattern":"another job"}`); strings.Contains(out, "another job") {
		t.Errorf("grep found another job's input: %q", out)
	}
	if out, _ := run(t, reg, "glob", `{"pattern":"**/input.json"}`); strings.Contains(out, "other-job") {
		t.Errorf("glob found another job's input: %q", out)
	}
}

// TestBashWithoutNetwork: with NoNetwork, bash's commands run in a network
// namespace of their own and reach nothing, not even the host's loopback;
// the job directory is their working directory.
func TestBashWithoutNetwork(t *testing.T) {
	if err := tools.NetworkIsolation(); err != nil {
		t.Fatalf("this machine cannot make a network namespace (%v): job mode refuses bash without network here", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("reached\n"))
			_ = c.Close()
		}
	}()
	d, err := jobspace.Layout(t.TempDir(), jobID, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := jobspace.Policy(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := `{"command":"pwd; (exec 3<>/dev/tcp/` + strings.Replace(ln.Addr().String(), ":", "/", 1) + ` && cat <&3) || echo unreachable"}`
	for _, noNetwork := range []bool{false, true} {
		reg, err := tools.New(pol, tools.Options{Enabled: []string{"bash"}, NoNetwork: noNetwork})
		if err != nil {
			t.Fatal(err)
		}
		out, isErr := run(t, reg, "bash", cmd)
		if isErr || !strings.Contains(out, d.Path+"\n") {
			t.Errorf("network %v: %q, want the job directory as cwd", !noNetwork, out)
		}
		if reached := strings.Contains(out, "reached"); reached == noNetwork || strings.Contains(out, "unreachable") != noNetwork {
			t.Errorf("no network %v: %q", noNetwork, out)
		}
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
