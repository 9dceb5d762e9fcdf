package provision_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// The env files of a configuration: dotenv, 0600, values quoted where they
// are not plain; a link at a file's path is replaced, never followed; a
// required key without a value is a warning that names the key and no
// value; the events name keys only.
func TestEnvFilesAreWrittenInsideTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "web", ".env")); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"PLAIN": "abc-123", "QUOTED": "a b\"c$HOME\nnext"}
	rec := &recorder{}
	st := provision.Run(t.Context(), &sandboxwire.WorkspaceSpec{SetupTimeoutSeconds: 30, Saved: &sandboxwire.SavedConfiguration{EnvFiles: []sandboxwire.SavedEnvFile{
		{Path: "web/.env", Format: "dotenv", Keys: []sandboxwire.SavedEnvKey{{Key: "PLAIN", Required: true}, {Key: "QUOTED"}, {Key: "ABSENT"}}},
		{Path: "api/config/.env.local", Format: "dotenv", Keys: []sandboxwire.SavedEnvKey{{Key: "NEEDED", Required: true}}},
		{Path: "../escape.env", Format: "dotenv", Keys: []sandboxwire.SavedEnvKey{{Key: "PLAIN"}}},
	}}}, provision.Options{Dir: dir, Emit: rec.emit, Values: values, Secrets: redact.New("abc-123", values["QUOTED"])})
	got := read(t, filepath.Join(dir, "web", ".env"))
	if !strings.HasSuffix(got, "PLAIN=abc-123\nQUOTED=\"a b\\\"c\\$HOME\\nnext\"\n") {
		t.Errorf("web/.env = %q", got)
	}
	if info, err := os.Lstat(filepath.Join(dir, "web", ".env")); err != nil || info.Mode() != 0o600 {
		t.Errorf("web/.env is %v (%v), want a regular file, 0600", info.Mode(), err)
	}
	if read(t, outside) != "untouched" {
		t.Errorf("the link at the env file's path was followed")
	}
	if got := read(t, filepath.Join(dir, "api", "config", ".env.local")); strings.Contains(got, "NEEDED") {
		t.Errorf("api/config/.env.local = %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.env")); !os.IsNotExist(err) {
		t.Errorf("an env file was written outside the workspace: %v", err)
	}
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 2 ||
		!strings.Contains(st.Warnings[0], "api/config/.env.local lacks required key(s) NEEDED") || !strings.Contains(st.Warnings[1], "../escape.env was not written") {
		t.Errorf("status = %+v", st)
	}
	raw := rec.raw()
	if strings.Contains(raw, "abc-123") || strings.Contains(raw, "next") || !strings.Contains(raw, `"keys":["PLAIN","QUOTED","ABSENT"]`) {
		t.Errorf("events: %s", raw)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceEnvFiles, sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// The snapshot is downloaded and restored after the clone and before the
// setup commands, which see its files; the services start after them, in
// their folders, with the environment, their output in their log; Stop ends
// them. A service whose folder is missing is a warning; a snapshot the
// store will not give is one too.
func TestSnapshotThenSetupThenServices(t *testing.T) {
	archive := tarball(t, ent{name: "app/", dir: true}, ent{name: "app/data.txt", body: "from the snapshot"})
	body, err := os.ReadFile(archive.Name())
	if err != nil {
		t.Fatal(err)
	}
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/snap" {
			http.Error(w, "denied", http.StatusForbidden)
			return
		}
		_, _ = w.Write(body)
	}))
	defer store.Close()
	dir := t.TempDir()
	services := &provision.Services{}
	defer services.Stop()
	rec := &recorder{}
	ran := filepath.Join(t.TempDir(), "ran")
	st := provision.Run(t.Context(), &sandboxwire.WorkspaceSpec{SetupTimeoutSeconds: 30, SetupCommands: []string{"cp app/data.txt app/seen.txt"},
		Saved: &sandboxwire.SavedConfiguration{
			Snapshot: &sandboxwire.SavedSnapshot{URL: store.URL + "/snap", SizeBytes: int64(len(body)), SavedAt: time.Now()},
			Services: []sandboxwire.SavedService{
				{Name: "web/1", Command: `echo "$(basename "$PWD") $GREETING"; echo started > ` + ran + `; exec sleep 30`, Cwd: "app"},
				{Name: "nowhere", Command: "true", Cwd: "missing"},
			},
		}}, provision.Options{Dir: dir, Emit: rec.emit, Env: append(os.Environ(), "GREETING=hello"), Services: services})
	if got := read(t, filepath.Join(dir, "app", "seen.txt")); got != "from the snapshot" {
		t.Errorf("the setup command did not see the snapshot: %q", got)
	}
	if st.Status != sandboxwire.WorkspaceReady || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "the service nowhere (true) did not start: its folder missing does not exist") {
		t.Errorf("status = %+v", st)
	}
	want := []string{sandboxwire.TypeWorkspaceCreating, sandboxwire.TypeWorkspaceRestoring, sandboxwire.TypeWorkspaceSetup,
		sandboxwire.TypeWorkspaceServices, sandboxwire.TypeWorkspaceWarning, sandboxwire.TypeWorkspaceReady}
	if got := rec.types(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	// The service ran in its folder with the environment; its output is in its log.
	logPath := filepath.Join(dir, filepath.FromSlash(provision.ServiceLog("web/1")))
	if !strings.HasSuffix(logPath, filepath.Join(".remote-agent", "services", "web_1.log")) {
		t.Errorf("log path %s", logPath)
	}
	waitFile(t, ran)
	if got := read(t, logPath); got != "app hello\n" {
		t.Errorf("service log = %q", got)
	}

	// A snapshot the store refuses: a warning, the workspace as it was.
	rec = &recorder{}
	st = provision.Run(t.Context(), &sandboxwire.WorkspaceSpec{SetupTimeoutSeconds: 30, Saved: &sandboxwire.SavedConfiguration{
		Snapshot: &sandboxwire.SavedSnapshot{URL: store.URL + "/expired"}}}, provision.Options{Dir: t.TempDir(), Emit: rec.emit})
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "the snapshot was not restored: the object store answered 403") {
		t.Errorf("status = %+v", st)
	}
}

// waitFile waits for a service to write path (its sign that it ran).
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if f, err := os.Open(path); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			_ = f.Close()
			if line == "started\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
