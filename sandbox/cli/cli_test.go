package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/cli"
)

func call(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code, ok := cli.Main(t.Context(), args, &out, &errOut)
	if !ok {
		t.Fatalf("%v not handled", args)
	}
	return code, out.String(), errOut.String()
}

func TestExamples(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("../examples/*/Agentfile")
	if err != nil || len(dirs) < 4 {
		t.Fatalf("examples: %v, %v", dirs, err)
	}
	for _, af := range dirs {
		dir := filepath.Dir(af)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			if code, out, errOut := call(t, "validate", af); code != cli.ExitOK || !strings.Contains(out, "is valid") {
				t.Errorf("validate: %d %q %q", code, out, errOut)
			}
			if code, out, _ := call(t, "inspect", af); code != cli.ExitOK || !strings.Contains(out, "steps:") {
				t.Errorf("inspect: %d %q", code, out)
			}
			if code, out, _ := call(t, "inspect", af, "--json"); code != cli.ExitOK || !strings.Contains(out, `"Steps"`) {
				t.Errorf("inspect --json: %d %q", code, out)
			}
			want, err := os.ReadFile(filepath.Join(dir, "expected.txt"))
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := call(t, "run", af, "--config", filepath.Join(dir, "agent.json"), "--input", inputFor(dir))
			if code != cli.ExitOK || out != string(want) {
				t.Errorf("run: exit %d, stdout %q, want %q\nstderr:\n%s", code, out, want, errOut)
			}
			if !strings.Contains(errOut, "workflow complete") || !strings.Contains(errOut, "scripted provider") {
				t.Errorf("run events on stderr:\n%s", errOut)
			}
		})
	}
}

// inputFor returns one input each example accepts.
func inputFor(dir string) string {
	switch filepath.Base(dir) {
	case "loop-within":
		return "subject=streaming"
	case "multi-agent":
		return "plan=Adopt Fargate"
	case "goal-from-file":
		return "issue=Timeouts"
	default:
		return "topic=Go"
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	af := filepath.Join(dir, "Agentfile")
	if err := os.WriteFile(af, []byte("NAME w\nINPUT topic\nGOAL g \"about $topic\"\nRUN r USING g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "Bad")
	if err := os.WriteFile(bad, []byte("NAME w\nTASK x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.json")
	if err := os.WriteFile(cfg, []byte(`{"llm":{"provider":"palm"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing input", []string{"run", af}, cli.ExitUsage, "missing required input topic"},
		{"unknown input", []string{"run", af, "--input", "topic=x", "--input", "color=red"}, cli.ExitUsage, "unknown input color"},
		{"bad input flag", []string{"run", af, "--input", "novalue"}, cli.ExitUsage, "key=value"},
		{"syntax error", []string{"run", bad, "--input", "x=y"}, cli.ExitUsage, `Bad:2:1: unknown keyword "TASK"`},
		{"validate syntax error", []string{"validate", bad}, cli.ExitUsage, `unknown keyword "TASK"`},
		{"bad config", []string{"run", af, "--config", cfg, "--input", "topic=x"}, cli.ExitUsage, `llm.provider "palm"`},
		{"missing config", []string{"run", af, "--config", filepath.Join(dir, "nope.json")}, cli.ExitUsage, "no such file"},
		{"no Agentfile", []string{"run"}, cli.ExitUsage, "usage: agent run"},
		{"missing Agentfile", []string{"validate", filepath.Join(dir, "missing")}, cli.ExitUsage, "file not found"},
	}
	for _, tt := range tests {
		code, _, errOut := call(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d with %q", tt.name, code, errOut, tt.code, tt.want)
		}
	}
	// Without a config, the scripted provider says plainly that no LLM is set.
	code, out, _ := call(t, "run", af, "--input", "topic=Go")
	if code != cli.ExitOK || !strings.Contains(out, "no LLM is configured") {
		t.Errorf("run without config: %d %q", code, out)
	}
}
