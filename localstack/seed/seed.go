// Package seed loads the development fixtures into the registry: the
// projects, personas, agent types and configurations of this folder's JSON files
// (embedded, as Fixtures) or of another folder, and the development app key.
// The dev server (devserver.Seed) and the LocalStack init hook
// (localstack/cmd/bootstrap) both load them through Load.
package seed

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/token"
)

// Fixtures are this folder's fixtures.
//
//go:embed projects.json personas.json agent_types.json configurations.json
var Fixtures embed.FS

// DefaultAppKey is the development app key unless RA_DEV_APP_KEY says otherwise.
const DefaultAppKey = "ra_dev_app_key"

// DevTenant is the tenant of the development app key, and of the fixtures'
// projects and configurations.
const DevTenant = "dev"

// AppKeyID is the development app key's id.
const AppKeyID = "dev"

// DefaultE2BKey is the development E2B API key (an app key of DevTenant
// shaped as the E2B SDKs before 2.51 require: "e2b_" and 40 hex digits)
// unless RA_DEV_E2B_KEY says otherwise; E2BKeyID is its id.
const (
	DefaultE2BKey = "e2b_00000000000000000000000000000000000de7e1"
	E2BKeyID      = "dev-e2b"
)

// RegisterE2BKey registers key, by its hash, as E2BKeyID of DevTenant.
func RegisterE2BKey(ctx context.Context, reg registry.Store, key string) error {
	if err := reg.PutAppKey(ctx, registry.AppKey{ID: E2BKeyID, Label: "development E2B API key", Hash: token.Hash(key), Tenant: DevTenant}); err != nil {
		return fmt.Errorf("seed the E2B API key: %w", err)
	}
	return nil
}

// Report counts what Load put: every item is created or replaced, so a second
// load changes nothing.
type Report struct {
	Projects, Personas, AgentTypes, Configurations int
	AppKey                                         bool
}

// Load puts the fixtures of fixtures (projects.json, personas.json,
// agent_types.json, configurations.json; any may be missing; nil loads none)
// into the registry and registers appKey (none if ""), by its hash, as
// AppKeyID of DevTenant. A fixture names its tenant; one that names none is
// the platform's (the personas, the agent type "default"). A seeded agent
// type's workspace configuration must be one the agent type routes would
// accept.
func Load(ctx context.Context, reg registry.Store, fixtures fs.FS, appKey string) (Report, error) {
	var r Report
	if fixtures != nil {
		var projects []registry.Project
		if err := read(fixtures, "projects.json", &projects); err != nil {
			return r, err
		}
		for _, p := range projects {
			if err := reg.PutProject(ctx, p); err != nil {
				return r, fmt.Errorf("seed project %s: %w", p.Name, err)
			}
			r.Projects++
		}
		var personas []registry.Persona
		if err := read(fixtures, "personas.json", &personas); err != nil {
			return r, err
		}
		for _, p := range personas {
			if err := reg.PutPersona(ctx, p); err != nil {
				return r, fmt.Errorf("seed persona %s: %w", p.Slug, err)
			}
			r.Personas++
		}
		var types []registry.AgentType
		if err := read(fixtures, "agent_types.json", &types); err != nil {
			return r, err
		}
		for _, t := range types {
			d := config.DefaultWorkspaceLimits
			cfg, err := agenttype.Validate(t.Workspace, registry.ResourceLimits{CPU: d.CPU, Memory: d.Memory, Disk: d.Disk})
			if err != nil {
				return r, fmt.Errorf("seed agent type %s: %w", t.ID, err)
			}
			t.Workspace = cfg
			if err := reg.PutAgentType(ctx, t); err != nil {
				return r, fmt.Errorf("seed agent type %s: %w", t.ID, err)
			}
			r.AgentTypes++
		}
		var configs []registry.Configuration
		if err := read(fixtures, "configurations.json", &configs); err != nil {
			return r, err
		}
		for _, c := range configs {
			if err := reg.PutConfiguration(ctx, c); err != nil {
				return r, fmt.Errorf("seed configuration %s: %w", c.ID, err)
			}
			r.Configurations++
		}
	}
	if appKey != "" {
		if err := reg.PutAppKey(ctx, registry.AppKey{ID: AppKeyID, Label: "development app key", Hash: token.Hash(appKey), Tenant: DevTenant}); err != nil {
			return r, fmt.Errorf("seed app key: %w", err)
		}
		r.AppKey = true
	}
	return r, nil
}

func read(fixtures fs.FS, name string, v any) error {
	b, err := fs.ReadFile(fixtures, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("seed: %s: %w", name, err)
	}
	return nil
}
