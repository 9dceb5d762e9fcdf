package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/routes"
)

const (
	root   = "../../.."
	module = "github.com/remote-agents/remote-agents"
	// base is the part every function links (package wiring).
	base = module + "/shared/wiring"
)

// routeOnly names the packages only some functions may link (module paths
// relative to the module): each route's handlers and what only those
// functions use. Every package a function's own package imports beyond the
// common part must be listed (TestEachFunctionLinksOnlyItsRoutesPackages
// fails otherwise), so a new route's packages cannot go unchecked.
var routeOnly = map[string][]string{
	"shared/sessionapi":                        {"create", "alive", "shutdown", "messages"},
	"shared/fleetapi":                          {"fleet"},
	"shared/fleet":                             {"fleet", "e2b"},
	"shared/wiring/fleetservice":               {"fleet", "e2b"},
	"shared/wiring/creatorservice":             {"create", "e2b"},
	"shared/e2bapi":                            {"e2b"},
	"shared/wiring/e2bservice":                 {"e2b"},
	"shared/usage":                             {"fleet"},
	"shared/sandboxchannel":                    {"sandbox"},
	"shared/agenttypeapi":                      {"agenttypes"},
	"shared/workspaceapi":                      {"workspace"},
	"shared/eventsapi":                         {"events", "joblogs"},
	"shared/joblogapi":                         {"joblogs"},
	"shared/embedview":                         {"embed"},
	"shared/sandboxapi":                        {"sandbox"},
	"shared/modelapi":                          {"model"},
	"shared/modelgateway":                      {"model"},
	"shared/smsecrets":                         {"model"},
	"shared/smstore":                           {"agenttypes"},
	"shared/secretsapi":                        {"agenttypes"},
	"shared/webhookapi":                        {"agenttypes"},
	"shared/wiring/webhookservice":             {"agenttypes", "webhooks"},
	"shared/wiring/secretstore":                {"agenttypes"},
	"data":                                     {"model"},
	"shared/toolapi":                           {"toolcallback"},
	"shared/orchestratorapi":                   {"jobs", "joblogs"},
	"shared/queueworker":                       {"jobworker"},
	"shared/launch/fargate":                    {"jobworker"},
	"shared/eventbus":                          {"jobs", "sandbox", "jobworker"},
	"shared/wiring/jobservice":                 {"jobs", "sandbox", "jobworker"},
	"shared/wiring/poolservice":                {"create", "agenttypes", "sandbox", "jobworker", "e2b"},
	"shared/wiring/toolservice":                {"toolcallback", "jobworker"},
	"shared/wiring/functionset":                {},
	"github.com/aws/aws-sdk-go-v2/service/ecs": {"jobworker"},
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager": {"model", "agenttypes", "e2b"},
	"github.com/aws/aws-sdk-go-v2/service/eventbridge":    {"jobs", "sandbox", "jobworker"},
}

// pkg is one package as go list gives it, built as the functions are.
type pkg struct{ imports, deps []string }

// listPackages returns the packages of patterns as the Lambda build sees
// them (linux/arm64, its tags).
func listPackages(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	args := append([]string{"list", "-tags", tags, "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), buildEnv("arm64")...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		pkgs[f[0]] = pkg{imports: strings.Fields(f[1]), deps: strings.Fields(f[2])}
	}
	return pkgs
}

func full(p string) string {
	if strings.Contains(p, ".") {
		return p
	}
	return module + "/" + p
}

// Every function links the common part, its own package and what the
// table lets it: no other function's package, no other route's handlers,
// ECS only in jobworker.
func TestEachFunctionLinksOnlyItsRoutesPackages(t *testing.T) {
	t.Parallel()
	names, err := functions(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(slices.Values(routes.Functions())); !slices.Equal(names, want) {
		t.Fatalf("functions/ holds %v, the route table %v", names, want)
	}
	pkgs := listPackages(t, "./functions/...", "./shared/wiring/...")
	common := map[string]bool{base: true}
	for _, d := range pkgs[base].deps {
		common[d] = true
	}
	allowed := map[string][]string{}
	for p, fns := range routeOnly {
		allowed[full(p)] = fns
		if common[full(p)] {
			t.Errorf("%s is in every function (package wiring links it), yet declared for %v only", p, fns)
		}
	}
	own := func(name string) string { return base + "/" + name }
	linked := map[string]bool{}
	for _, name := range names {
		main := pkgs[module+"/functions/"+name]
		if !slices.Contains(main.imports, own(name)) {
			t.Errorf("functions/%s does not build from its package shared/wiring/%s", name, name)
		}
		// What the function's own code imports beyond the common part is
		// route-specific: it must be declared.
		for _, p := range append(slices.Clone(main.imports), pkgs[own(name)].imports...) {
			if !strings.HasPrefix(p, module+"/") || common[p] || p == own(name) {
				continue
			}
			if fns, ok := allowed[p]; !ok {
				t.Errorf("functions/%s imports %s: declare in routeOnly which functions may link it", name, p)
			} else if !slices.Contains(fns, name) {
				t.Errorf("functions/%s imports %s, which routeOnly gives %v", name, p, fns)
			}
		}
		var internal int
		for _, d := range main.deps {
			linked[d] = true
			if strings.HasPrefix(d, module+"/") {
				internal++
			}
			if fns, ok := allowed[d]; ok && !slices.Contains(fns, name) {
				t.Errorf("functions/%s links %s, which only %v may", name, d, fns)
			}
			if other, ok := strings.CutPrefix(d, base+"/"); ok && slices.Contains(names, other) && other != name {
				t.Errorf("functions/%s links function %s's package", name, other)
			}
		}
		t.Logf("functions/%-12s %3d packages, %2d of them this module's", name, len(main.deps)+1, internal+1)
	}
	for p, fns := range allowed {
		if len(fns) > 0 && !linked[p] {
			t.Errorf("routeOnly names %s, which no function links: remove or rename it", p)
		}
	}
}

// Two builds of the same source, as make build makes them, give the same
// zips, byte for byte.
func TestBuildsAreReproducible(t *testing.T) {
	t.Parallel()
	names := []string{"alive", "jobworker"}
	var sums [2]map[string][32]byte
	for i := range sums {
		out := t.TempDir()
		var logs bytes.Buffer
		// The host's architecture: reproducibility does not depend on it,
		// and make bench-short builds the same way, so the two share the
		// build cache (an arm64 build would compile every dependency again).
		if err := build(root, runtime.GOARCH, out, names, &logs); err != nil {
			t.Fatalf("%v\n%s", err, logs.String())
		}
		sums[i] = map[string][32]byte{}
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(out, n+".zip"))
			if err != nil {
				t.Fatal(err)
			}
			sums[i][n] = sha256.Sum256(b)
			checkZip(t, b)
		}
	}
	for _, n := range names {
		if sums[0][n] != sums[1][n] {
			t.Errorf("%s: two builds gave zips %x and %x", n, sums[0][n], sums[1][n])
		}
	}
	if sums[0]["alive"] == sums[0]["jobworker"] {
		t.Error("alive and jobworker have the same zip")
	}
}

// checkZip checks that b is a deployment zip: bootstrap alone, executable,
// dated zipTime.
func checkZip(t *testing.T, b []byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 {
		t.Fatalf("%d files in the zip", len(zr.File))
	}
	f := zr.File[0]
	if f.Name != "bootstrap" || f.Mode() != 0o755 || !f.Modified.Equal(zipTime) {
		t.Errorf("zip holds %s %v %v, want bootstrap -rwxr-xr-x %v", f.Name, f.Mode(), f.Modified, zipTime)
	}
}

// A zip depends on its file's contents only, not on when it was written.
func TestZipDependsOnContentsOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var zips [2][]byte
	for i, mtime := range []time.Time{time.Now(), time.Now().Add(-48 * time.Hour)} {
		bin := filepath.Join(dir, "bootstrap")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho hi\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(bin, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "f.zip")
		if err := writeZip(bin, path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkZip(t, b)
		zips[i] = b
	}
	if !bytes.Equal(zips[0], zips[1]) {
		t.Error("the same file written at two times gave two zips")
	}
}
