// Package registrytest is the contract of registry.Store, run against every
// implementation: Run checks a store against the interface's documented
// behaviour (dynamo.Registry runs it against DynamoDB Local).
package registrytest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Run checks the store newStore returns against the registry.Store contract.
// Each subtest calls newStore once and runs in parallel with the others; subtests
// use fresh names, so newStore may return the same store every time.
func Run(t *testing.T, newStore func(t *testing.T) registry.Store) {
	t.Run("projects", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		p := registry.Project{Name: "project-" + unique(t), CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := st.PutProject(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Project(t.Context(), p.Name); err != nil || got != p {
			t.Errorf("Project = %+v, %v; want %+v", got, err, p)
		}
		p.CreatedAt = time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
		if err := st.PutProject(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Project(t.Context(), p.Name); err != nil || got != p {
			t.Errorf("Project after a replacing put = %+v, %v; want %+v", got, err, p)
		}
		if _, err := st.Project(t.Context(), "project-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Project of an unknown name: %v, want ErrNotFound", err)
		}
	})

	t.Run("personas, active or not", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		p := registry.Persona{Slug: "persona-" + unique(t), Name: "Reviewer", Skill: "Reads diffs.", Experience: "Ten years.", Active: true}
		if err := st.PutPersona(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Persona(t.Context(), p.Slug); err != nil || got != p {
			t.Errorf("Persona = %+v, %v; want %+v", got, err, p)
		}
		p.Active, p.Skill = false, "Retired."
		if err := st.PutPersona(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Persona(t.Context(), p.Slug); err != nil || got != p {
			t.Errorf("inactive Persona = %+v, %v; want %+v", got, err, p)
		}
		if _, err := st.Persona(t.Context(), "persona-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Persona of an unknown slug: %v, want ErrNotFound", err)
		}
	})

	t.Run("app keys by hash", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		k := registry.AppKey{ID: "key-" + unique(t), Label: "CI", Hash: "hash-" + unique(t)}
		if err := st.PutAppKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
		if got, err := st.AppKeyByHash(t.Context(), k.Hash); err != nil || got != k {
			t.Errorf("AppKeyByHash = %+v, %v; want %+v", got, err, k)
		}
		k.Disabled = true
		if err := st.PutAppKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
		if got, err := st.AppKeyByHash(t.Context(), k.Hash); err != nil || got != k {
			t.Errorf("disabled AppKeyByHash = %+v, %v; want %+v", got, err, k)
		}
		if _, err := st.AppKeyByHash(t.Context(), "hash-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("AppKeyByHash of an unknown hash: %v, want ErrNotFound", err)
		}
		// A key is found by its hash: one without could never be.
		if err := st.PutAppKey(t.Context(), registry.AppKey{ID: "key-" + unique(t), Label: "no hash"}); err == nil {
			t.Error("an app key without a hash was stored")
		}
	})

	t.Run("configurations", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		c := registry.Configuration{
			ID: "cfg-" + unique(t), RepoName: "acme/shop",
			Snapshot:        &registry.Snapshot{Key: "snapshots/a.tar.gz", SizeBytes: 1 << 20, Message: "deps", SessionID: "s-1", SavedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
			ServiceCommands: []toolspec.ServiceCommand{{Name: "web", Command: "npm start", Cwd: "app"}},
			EnvFiles:        []toolspec.EnvFile{{Path: ".env", Format: "dotenv", Mode: "0600", Keys: []toolspec.EnvKey{{Key: "API_URL"}}}},
			UpdatedAt:       time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}
		if err := st.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Configuration(t.Context(), c.ID); err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("Configuration = %+v, %v;\nwant %+v", got, err, c)
		}
		bare := registry.Configuration{ID: "cfg-" + unique(t), RepoName: "acme/bare"}
		if err := st.PutConfiguration(t.Context(), bare); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Configuration(t.Context(), bare.ID); err != nil || !reflect.DeepEqual(got, bare) {
			t.Errorf("bare Configuration = %+v, %v; want %+v", got, err, bare)
		}
		if _, err := st.Configuration(t.Context(), "cfg-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Configuration of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("update configuration sets fields of an existing one", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		c := registry.Configuration{ID: "cfg-" + unique(t), RepoName: "acme/shop", UpdatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := st.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		saved := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
		snap := registry.Snapshot{Key: "snapshots/b.tar.gz", SizeBytes: 42, SessionID: "s-2", SavedAt: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)}
		cmds := []toolspec.ServiceCommand{{Name: "api", Command: "go run ./cmd/api", WorkspacePath: "/w"}}
		if err := st.UpdateConfiguration(t.Context(), c.ID, registry.ConfigurationUpdate{Snapshot: &snap, ServiceCommands: cmds, UpdatedAt: saved}); err != nil {
			t.Fatal(err)
		}
		want := c
		want.Snapshot, want.ServiceCommands, want.UpdatedAt = &snap, cmds, snap.SavedAt
		if got, err := st.Configuration(t.Context(), c.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("after update: %+v, %v;\nwant %+v", got, err, want)
		}
		files := []toolspec.EnvFile{{Path: "api/.env", Format: "dotenv", Mode: "0600", Keys: []toolspec.EnvKey{{Key: "DB_URL"}, {Key: "TOKEN"}}}}
		if err := st.UpdateConfiguration(t.Context(), c.ID, registry.ConfigurationUpdate{EnvFiles: files}); err != nil {
			t.Fatal(err)
		}
		want.EnvFiles = files
		if got, err := st.Configuration(t.Context(), c.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("after a second update: %+v, %v;\nwant %+v (fields not set are kept)", got, err, want)
		}
		unknown := "cfg-" + unique(t)
		if err := st.UpdateConfiguration(t.Context(), unknown, registry.ConfigurationUpdate{UpdatedAt: saved}); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("update of an unknown id: %v, want ErrNotFound", err)
		}
		if got, err := st.Configuration(t.Context(), unknown); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("update of an unknown id created %+v, %v", got, err)
		}
	})

	t.Run("kinds do not share names", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		name := "same-" + unique(t)
		if err := st.PutProject(t.Context(), registry.Project{Name: name}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Persona(t.Context(), name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is found as a persona: %v", err)
		}
		if _, err := st.Configuration(t.Context(), name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is found as a configuration: %v", err)
		}
		if err := st.UpdateConfiguration(t.Context(), name, registry.ConfigurationUpdate{UpdatedAt: time.Now()}); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is updated as a configuration: %v", err)
		}
		if err := st.PutPersona(t.Context(), registry.Persona{Slug: name, Name: "P"}); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Project(t.Context(), name); err != nil || got.Name != name {
			t.Errorf("a persona of the same name replaced the project: %+v, %v", got, err)
		}
		if _, err := st.AppKeyByHash(t.Context(), name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is found as an app key: %v", err)
		}
	})
}

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
