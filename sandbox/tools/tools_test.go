package tools_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/sandbox/workflow"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

func setup(t *testing.T, policyTOML string) (*tools.Registry, string) {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "src", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"src/main.go":     "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"src/pkg/util.go": "package pkg\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"README.md":       "# Demo\nhello world\n",
		"../secret.txt":   "top secret\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "secret.txt"), filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(policyTOML, ws)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.New(p, tools.Options{MemoryPath: filepath.Join(root, "memory.json")})
	if err != nil {
		t.Fatal(err)
	}
	return r, ws
}

func call(t *testing.T, r *tools.Registry, name, args string) workflow.ToolResult {
	t.Helper()
	res, err := r.Run(t.Context(), llm.ToolCall{ID: "1", Name: name, Args: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func ok(t *testing.T, res workflow.ToolResult, contains ...string) {
	t.Helper()
	if res.IsError {
		t.Errorf("failed: %s", res.Content)
		return
	}
	for _, c := range contains {
		if !strings.Contains(res.Content, c) {
			t.Errorf("result %q lacks %q", res.Content, c)
		}
	}
}

func fails(t *testing.T, res workflow.ToolResult, contains string) {
	t.Helper()
	if !res.IsError || !strings.Contains(res.Content, contains) {
		t.Errorf("want a failure with %q, got %+v", contains, res)
	}
}

func TestDefinitionsAndValidation(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, "")
	names := map[string]bool{}
	for _, d := range r.Definitions() {
		names[d.Name] = true
		var schema map[string]any
		if err := json.Unmarshal(d.Schema, &schema); err != nil || schema["type"] != "object" || d.Description == "" {
			t.Errorf("definition %s: %v %v", d.Name, schema, err)
		}
	}
	for _, want := range []string{"read", "write", "edit", "glob", "grep", "ls", "bash", "memory_read", "memory_write"} {
		if !names[want] {
			t.Errorf("tool %s not registered", want)
		}
	}
	fails(t, call(t, r, "read", `{}`), "missing property 'path'")
	fails(t, call(t, r, "read", `{"path":"a","mode":"x"}`), "additional properties 'mode'")
	fails(t, call(t, r, "read", `{"path":7}`), "at /path")
	fails(t, call(t, r, "read", `not json`), "not valid JSON")
	fails(t, call(t, r, "bash", `{"command":"ls","timeout_seconds":9999}`), "at /timeout_seconds")
	fails(t, call(t, r, "teleport", `{}`), `unknown tool "teleport"`)
}

func TestFileTools(t *testing.T) {
	t.Parallel()
	r, ws := setup(t, "")
	ok(t, call(t, r, "read", `{"path":"src/main.go"}`), "     1\tpackage main", `println("hello")`)
	ok(t, call(t, r, "read", `{"path":"src/main.go","offset":3,"limit":1}`), "     3\tfunc main() {")
	fails(t, call(t, r, "read", `{"path":"missing.go"}`), "missing.go does not exist")
	fails(t, call(t, r, "read", `{"path":"src"}`), "is a folder")

	ok(t, call(t, r, "write", `{"path":"out/new/file.txt","content":"fresh"}`), "wrote 5 bytes to out/new/file.txt")
	if b, _ := os.ReadFile(filepath.Join(ws, "out/new/file.txt")); string(b) != "fresh" {
		t.Errorf("written %q", b)
	}
	ok(t, call(t, r, "write", `{"path":"README.md","content":"replaced"}`), "wrote")

	ok(t, call(t, r, "edit", `{"path":"src/main.go","old":"hello","new":"bye"}`), "replaced 1")
	fails(t, call(t, r, "edit", `{"path":"src/main.go","old":"nope","new":"x"}`), "not found")
	ok(t, call(t, r, "write", `{"path":"dup.txt","content":"a a a"}`))
	fails(t, call(t, r, "edit", `{"path":"dup.txt","old":"a","new":"b"}`), "occurs 3 times")
	ok(t, call(t, r, "edit", `{"path":"dup.txt","old":"a","new":"b","replace_all":true}`), "replaced 3")

	ok(t, call(t, r, "glob", `{"pattern":"src/**/*.go"}`), "src/main.go", "src/pkg/util.go")
	if res := call(t, r, "glob", `{"pattern":"*.go"}`); res.Content != "no files match *.go" {
		t.Errorf("glob *.go: %q", res.Content)
	}
	ok(t, call(t, r, "grep", `{"pattern":"func \\w+\\(","path":"src"}`), "src/main.go:3: func main() {", "src/pkg/util.go:4:")
	ok(t, call(t, r, "grep", `{"pattern":"Add adds","context":1}`), "src/pkg/util.go-2-", "src/pkg/util.go:3: // Add adds.")
	fails(t, call(t, r, "grep", `{"pattern":"("}`), "invalid regular expression")
	ok(t, call(t, r, "ls", `{}`), "dir", "src", "README.md", "link")
}

func TestToolsStayInTheWorkspace(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, "")
	for _, args := range []string{`{"path":"../secret.txt"}`, `{"path":"link.txt"}`, `{"path":"/etc/passwd"}`} {
		fails(t, call(t, r, "read", args), "denied by policy")
	}
	fails(t, call(t, r, "write", `{"path":"../evil.txt","content":"x"}`), "denied by policy")
	fails(t, call(t, r, "ls", `{"path":".."}`), "denied by policy")
	if res := call(t, r, "grep", `{"pattern":"top secret"}`); res.Content != "no matches" {
		t.Errorf("grep followed a link out of the workspace: %q", res.Content)
	}
	if res := call(t, r, "glob", `{"pattern":"**/*.txt"}`); strings.Contains(res.Content, "link.txt") {
		t.Errorf("glob listed a link out of the workspace: %q", res.Content)
	}
}

func TestBash(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, "[tools.bash]\ndeny = [\"curl *\"]\n")
	ok(t, call(t, r, "bash", `{"command":"echo out; echo err >&2; pwd"}`), "exit code: 0", "out", "err", "/ws")
	fails(t, call(t, r, "bash", `{"command":"echo partial; exit 3"}`), "exit code: 3")
	fails(t, call(t, r, "bash", `{"command":"sleep 5","timeout_seconds":1}`), "timed out after 1s")
	fails(t, call(t, r, "bash", `{"command":"echo x && curl http://example.com"}`), "denied by policy")
	fails(t, call(t, r, "bash", `{"command":"sudo id"}`), "denied by policy")
	res := call(t, r, "bash", `{"command":"head -c 200000 /dev/zero | tr '\\0' a"}`)
	ok(t, res, "more bytes cut")
	if len(res.Content) > 70*1024 {
		t.Errorf("output not capped: %d bytes", len(res.Content))
	}
}

func TestMemoryPersists(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, "")
	fails(t, call(t, r, "memory_read", `{"key":"plan"}`), "nothing stored")
	ok(t, call(t, r, "memory_write", `{"key":"plan","value":"ship it"}`), "stored")
	ok(t, call(t, r, "memory_read", `{"key":"plan"}`), "ship it")
}

func TestDisabledToolsAreNotOffered(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, "[tools.bash]\nenabled = false\n")
	for _, n := range r.Names() {
		if n == "bash" {
			t.Error("disabled bash offered")
		}
	}
	fails(t, call(t, r, "bash", `{"command":"ls"}`), "unknown tool")
}

// TestMemoryUnderDefaultDeny: with default_deny, the memory tools reach only
// the keys an allow pattern names (R6.2.5); deny wins as everywhere.
func TestMemoryUnderDefaultDeny(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, `
default_deny = true

[tools.memory_write]
allow = ["notes/*"]
deny = ["notes/secret*"]

[tools.memory_read]
enabled = true
`)
	ok(t, call(t, r, "memory_write", `{"key":"notes/a","value":"1"}`), "stored")
	fails(t, call(t, r, "memory_write", `{"key":"other","value":"1"}`), "not allowed")
	fails(t, call(t, r, "memory_write", `{"key":"notes/secret-1","value":"1"}`), "deny pattern")
	fails(t, call(t, r, "memory_read", `{"key":"notes/a"}`), "not allowed")
}

// In a sandbox bash runs with the environment it is given, never the agent's:
// whatever the agent holds in its own stays out of its commands.
func TestBashRunsWithTheGivenEnvironment(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p, err := policy.Parse("", root)
	if err != nil {
		t.Fatal(err)
	}
	given := []string{"PATH=" + os.Getenv("PATH"), "WORKSPACE=" + root, "STRIPE_KEY=sk_test_1"}
	r, err := tools.New(p, tools.Options{MemoryPath: filepath.Join(root, "m.json"), Env: func() []string { return given }})
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, r, "bash", `{"command":"env; cat /proc/self/environ | tr '\\0' '\\n'"}`)
	ok(t, res, "STRIPE_KEY=sk_test_1", "WORKSPACE="+root)
	// What the test process holds (its HOME, GOCACHE…) is not there.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"PATH", "PWD", "SHLVL", "_", "OLDPWD"}, name) && strings.Contains(res.Content, "\n"+name+"=") {
			t.Errorf("the agent's %s reached the command", name)
		}
	}
}

// As root with a tool user, bash runs as that user, and the files the file
// tools write are that user's; elsewhere there is no tool user to have.
func TestToolsRunAsTheToolUser(t *testing.T) {
	t.Parallel()
	// A workspace the tool user can reach, as /workspace is in the image.
	root, err := os.MkdirTemp("", "ra-tooluser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := toolenv.LookupUser("nobody", ws)
	if os.Geteuid() != 0 {
		if err == nil {
			t.Fatal("a tool user without root")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := u.OwnTree(ws); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("", ws)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.New(p, tools.Options{MemoryPath: filepath.Join(root, "m.json"), User: u,
		Env: toolenv.New(os.Environ(), ws, u).Environ})
	if err != nil {
		t.Fatal(err)
	}
	ok(t, call(t, r, "bash", `{"command":"id -u"}`), fmt.Sprintf("stdout:\n%d\n", u.UID))
	// The agent's own process is root's: its environment is out of reach.
	fails(t, call(t, r, "bash", fmt.Sprintf(`{"command":"cat /proc/%d/environ"}`, os.Getpid())), "exit code: 1")
	ok(t, call(t, r, "write", `{"path":"new/dir/file.txt","content":"hello"}`))
	for _, rel := range []string{"new", "new/dir", "new/dir/file.txt"} {
		info, err := os.Stat(filepath.Join(ws, rel))
		if err != nil || info.Sys().(*syscall.Stat_t).Uid != u.UID {
			t.Errorf("%s: %v, not the tool user's", rel, err)
		}
	}
	// …so its commands can change what the file tools wrote.
	ok(t, call(t, r, "bash", `{"command":"echo more >> new/dir/file.txt && cat new/dir/file.txt"}`), "hello", "more")
	ok(t, call(t, r, "edit", `{"path":"new/dir/file.txt","old":"hello","new":"bye"}`))
	ok(t, call(t, r, "bash", `{"command":"echo again >> new/dir/file.txt"}`))
}

// TestWorkspaceToolNamesAreTheRegistrysBuiltins: the names an agent type may
// enable (toolspec.WorkspaceTools, which the platform validates with) are
// exactly the built-in tools this registry offers under the default policy.
func TestWorkspaceToolNamesAreTheRegistrysBuiltins(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, "")
	got, want := r.Names(), toolspec.WorkspaceTools()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the registry offers %v; toolspec.WorkspaceTools names %v", got, want)
	}
}

// TestOnlyTheTypesToolsAreRegistered: with an agent type's tools, the
// registry holds only those (its definitions are what the model sees), and a
// call to any other workspace tool is refused with the spec's exact message.
func TestOnlyTheTypesToolsAreRegistered(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p, err := policy.Parse("", ws)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.New(p, tools.Options{MemoryPath: filepath.Join(ws, "memory.json"), Enabled: []string{"read", "grep"}})
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	for _, d := range r.Definitions() {
		defs = append(defs, d.Name)
	}
	if got := r.Names(); !slices.Equal(got, []string{"read", "grep"}) || !slices.Equal(defs, got) {
		t.Errorf("registered %v, defined %v; want read and grep only", got, defs)
	}
	for _, name := range []string{"bash", "git", "write", "web_fetch"} {
		res := call(t, r, name, `{"command":"id"}`)
		if want := "Tool '" + name + "' is not enabled for this agent type"; !res.IsError || res.Content != want {
			t.Errorf("%s: got %+v, want the failure %q", name, res, want)
		}
	}
	// A name that is no workspace tool is unknown, as without a type.
	fails(t, call(t, r, "no_such_tool", `{}`), "unknown tool")
	// Without a type's list, every built-in the policy enables is there.
	all, err := tools.New(p, tools.Options{MemoryPath: filepath.Join(ws, "memory.json")})
	if err != nil {
		t.Fatal(err)
	}
	fails(t, call(t, all, "no_such_tool", `{}`), "unknown tool")
	if len(all.Names()) != len(toolspec.WorkspaceTools()) {
		t.Errorf("registered %v", all.Names())
	}
}
