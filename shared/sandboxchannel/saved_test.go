package sandboxchannel_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// The spec of a session of a configuration carries what it saved: the
// latest snapshot as a URL that reads it, the env files and the services
// with their workspacePath joined. A snapshot key outside the
// configuration's prefix is not handed out; a session without a
// configuration, or whose type has no workspace, gets nothing.
func TestSpecCarriesTheSavedConfiguration(t *testing.T) {
	t.Parallel()
	c := newChannel(t, session.Provisioning)
	ctx := t.Context()
	key := sandboxchannel.SnapshotPrefix("cfg-1") + "abc.tar.gz"
	if err := c.bucket.Put(ctx, key, strings.NewReader("archive"), 7, "application/gzip"); err != nil {
		t.Fatal(err)
	}
	saved := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, cfg := range []registry.Configuration{
		{ID: "cfg-1", RepoName: "org/app", Tenant: "t1", Snapshot: &registry.Snapshot{Key: key, SizeBytes: 7, SavedAt: saved},
			EnvFiles:        []toolspec.EnvFile{{Path: ".env", WorkspacePath: "web", Format: "dotenv", Mode: "secret", Keys: []toolspec.EnvKey{{Key: "A", Required: true}}}},
			ServiceCommands: []toolspec.ServiceCommand{{Name: "web", Command: "npm start", Cwd: "src", WorkspacePath: "web"}, {Name: "root", Command: "make serve"}}},
		{ID: "cfg-2", RepoName: "org/other", Tenant: "t1", Snapshot: &registry.Snapshot{Key: sandboxchannel.SnapshotPrefix("cfg-1") + "abc.tar.gz"}},
	} {
		if err := c.reg.PutConfiguration(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	ws := &registry.WorkspaceConfig{Enabled: true, RepoSource: registry.RepoSource{Type: registry.RepoNone}}
	spec := func(cfgID string, w *registry.WorkspaceConfig) sandboxwire.Spec {
		t.Helper()
		tok, hash := token.New(token.Sandbox)
		s := session.Session{ID: uuid.NewString(), Tenant: "t1", Blueprint: session.Blueprint{
			PersonaSlug:     "helper",
			InitialPrompt:   "Hi",
			ConfigurationID: cfgID,
			Workspace:       w,
		},
			State: session.Provisioning, Generation: 1,
			SandboxTokenHash: hash, CreatedAt: c.now, UpdatedAt: c.now}
		if err := c.store.Create(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		got, err := c.ch.Spec(ctx, s.ID, tok)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := spec("cfg-1", ws)
	if got.Workspace == nil || got.Workspace.Saved == nil || got.Workspace.Saved.Snapshot == nil {
		t.Fatalf("spec.workspace = %+v", got.Workspace)
	}
	sv := got.Workspace.Saved
	if sv.Snapshot.SizeBytes != 7 || !sv.Snapshot.SavedAt.Equal(saved) {
		t.Errorf("snapshot %+v", sv.Snapshot)
	}
	res, err := http.Get(sv.Snapshot.URL)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("the snapshot URL does not read it: %v %v", res, err)
	} else {
		_ = res.Body.Close()
	}
	if len(sv.EnvFiles) != 1 || sv.EnvFiles[0].Path != "web/.env" || sv.EnvFiles[0].Keys[0] != (sandboxwire.SavedEnvKey{Key: "A", Required: true}) {
		t.Errorf("env files %+v", sv.EnvFiles)
	}
	if len(sv.Services) != 2 || sv.Services[0] != (sandboxwire.SavedService{Name: "web", Command: "npm start", Cwd: "web/src"}) || sv.Services[1].Cwd != "" {
		t.Errorf("services %+v", sv.Services)
	}
	if got := spec("cfg-2", ws); got.Workspace.Saved != nil {
		t.Errorf("another configuration's snapshot handed out: %+v", got.Workspace.Saved)
	}
	if got := spec("", ws); got.Workspace.Saved != nil {
		t.Errorf("a session without a configuration: %+v", got.Workspace.Saved)
	}
	if got := spec("cfg-1", &registry.WorkspaceConfig{}); got.Workspace != nil {
		t.Errorf("a type without a workspace: %+v", got.Workspace)
	}
}
