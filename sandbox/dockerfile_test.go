// Package sandbox_test checks the agent image definition. No Docker engine runs
// here, so the Dockerfile is checked by reading it against go.mod and the agent's
// real dependencies.
package sandbox_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestDockerfile(t *testing.T) {
	t.Parallel()
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	text := string(df)
	for _, want := range []string{
		"FROM golang:" + goVersion[1] + "-alpine AS build", // R12.1.1-2, Go version from go.mod
		"FROM alpine:3.21",                    // R12.1.3
		"apk add --no-cache git tmux",         // R12.1.4 (+ tmux for the named session)
		"/usr/local/bin/agent",                // R12.1.5
		"WORKDIR /workspace",                  // R12.1.6
		`ENTRYPOINT ["/usr/local/bin/agent"]`, // R12.1.7
		`VOLUME ["/workspace", "/data"]`,      // R12.2.1-2
		"USER agent",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The build stage copies only api/envd/, shared/ and sandbox/: the agent
	// must need nothing else.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../sandbox/cmd/agent").Output()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/remote-agents/remote-agents/"
	for _, pkg := range strings.Fields(string(out)) {
		rest, ok := strings.CutPrefix(pkg, module)
		copied := slices.ContainsFunc([]string{"api/envd/", "shared/", "sandbox/"}, func(dir string) bool {
			return strings.HasPrefix(rest, dir) && strings.Contains(text, "COPY "+dir+" "+dir)
		})
		if ok && !copied {
			t.Errorf("the agent imports %s, which the Dockerfile does not copy", pkg)
		}
	}
}

// TestDockerfileStagesAgree: the Debian stage (make image) runs the agent as
// the alpine stage does: the same user, folder, environment, volumes,
// entrypoint and command, and the same packages; and the last stage, what a
// plain build makes, is the alpine one.
func TestDockerfileStagesAgree(t *testing.T) {
	t.Parallel()
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string][]string{}
	var order []string
	name := ""
	for line := range strings.SplitSeq(string(df), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "FROM" {
			name = f[1]
			if len(f) == 4 && f[2] == "AS" {
				name = f[3]
			}
			order = append(order, name)
			continue
		}
		if name != "" && line != "" && !strings.HasPrefix(line, "#") {
			stages[name] = append(stages[name], line)
		}
	}
	if len(order) != 3 || order[0] != "build" || order[1] != "debian" || order[2] != "alpine:3.21" {
		t.Fatalf("stages %v, want build, debian, then alpine:3.21 last", order)
	}
	runtime := func(stage string) []string {
		var out []string
		for _, l := range stages[stage] {
			if k, _, _ := strings.Cut(l, " "); k == "USER" || k == "WORKDIR" || k == "ENV" || k == "VOLUME" || k == "ENTRYPOINT" || k == "CMD" {
				out = append(out, l)
			}
		}
		return out
	}
	if d, a := runtime("debian"), runtime("alpine:3.21"); strings.Join(d, "\n") != strings.Join(a, "\n") || len(a) != 6 {
		t.Errorf("the stages run the agent differently:\ndebian: %q\nalpine: %q", d, a)
	}
	for _, pkg := range []string{"git", "tmux", "bash", "ca-certificates"} {
		for _, stage := range []string{"debian", "alpine:3.21"} {
			if !strings.Contains(strings.Join(stages[stage], "\n"), " "+pkg) {
				t.Errorf("stage %s does not install %s", stage, pkg)
			}
		}
	}
}
