package confine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/confine"
)

func TestMain(m *testing.M) {
	confine.Main()
	os.Exit(m.Run())
}

// TestConfinedShellReachesOnlyWhatItIsGiven: a shell confined to a job's
// directories reads its input, writes its work, runs programs, and cannot
// write its input, read a sibling's secret (by path, by "..", by a symlink it
// makes), nor touch /tmp. It fails on a kernel without Landlock: it cannot
// check what it claims there.
func TestConfinedShellReachesOnlyWhatItIsGiven(t *testing.T) {
	root := t.TempDir()
	job, other := filepath.Join(root, "job"), filepath.Join(root, "other")
	for _, d := range []string{job + "/input", job + "/work", other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(job+"/input/brief.md", "brief")
	must(other+"/secret", "secret")
	rules := confine.Rules{Read: []string{job + "/input"}, Write: []string{job + "/work"}}
	if _, err := confine.ABI(); err != nil {
		// Nothing runs as if it were confined (the agent refuses the job
		// then), but what this test claims cannot be checked here.
		if _, cerr := confine.Command(t.Context(), rules, "true"); cerr == nil {
			t.Errorf("a confined command without Landlock (%v)", err)
		}
		t.Fatalf("no Landlock on this kernel (%v): confinement cannot be checked here", err)
	}
	run := func(script string) (string, error) {
		cmd, err := confine.Command(t.Context(), rules, "bash", "-c", script)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Dir = job + "/work"
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, ok := range []string{
		"cat ../input/brief.md",
		"echo hi > note.txt && cat note.txt && rm note.txt",
		"ls /usr/bin >/dev/null && echo x > /dev/null",
	} {
		if out, err := run(ok); err != nil {
			t.Errorf("%q: %v\n%s", ok, err, out)
		}
	}
	for _, refused := range []string{
		"echo x > ../input/brief.md",
		"cat " + other + "/secret",
		"cat ../../other/secret",
		"ln -s " + other + "/secret link && cat link",
		"echo x > /tmp/ra-confine-test",
	} {
		if out, err := run(refused); err == nil || strings.Contains(out, "secret\n") || out == "secret" {
			t.Errorf("%q was allowed: %q", refused, out)
		}
	}
	if got, _ := os.ReadFile(job + "/input/brief.md"); string(got) != "brief" {
		t.Errorf("the input was changed: %q", got)
	}
}
