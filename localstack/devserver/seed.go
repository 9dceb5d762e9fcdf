package devserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/token"
)

// DefaultAppKey is the development app key unless RA_DEV_APP_KEY says otherwise.
const DefaultAppKey = "ra_dev_app_key"

// DevTenant is the tenant of the development app key, and of the fixtures'
// projects and configurations.
const DevTenant = "dev"

// Seed loads the fixtures of dir (projects.json, personas.json,
// configurations.json, agent_types.json; any may be missing) into the registry
// and registers appKey, by its hash, as "dev" of tenant DevTenant. A fixture
// names its tenant; one that names none is the platform's (the personas, the
// agent type "default"). A seeded agent type's workspace configuration must be
// one the agent type routes would accept.
func Seed(ctx context.Context, reg registry.Store, dir, appKey string) error {
	if dir != "" {
		var projects []registry.Project
		if err := readFixture(filepath.Join(dir, "projects.json"), &projects); err != nil {
			return err
		}
		for _, p := range projects {
			if err := reg.PutProject(ctx, p); err != nil {
				return fmt.Errorf("seed project %s: %w", p.Name, err)
			}
		}
		var personas []registry.Persona
		if err := readFixture(filepath.Join(dir, "personas.json"), &personas); err != nil {
			return err
		}
		for _, p := range personas {
			if err := reg.PutPersona(ctx, p); err != nil {
				return fmt.Errorf("seed persona %s: %w", p.Slug, err)
			}
		}
		var types []registry.AgentType
		if err := readFixture(filepath.Join(dir, "agent_types.json"), &types); err != nil {
			return err
		}
		for _, t := range types {
			d := config.DefaultWorkspaceLimits
			cfg, err := agenttype.Validate(t.Workspace, registry.ResourceLimits{CPU: d.CPU, Memory: d.Memory, Disk: d.Disk})
			if err != nil {
				return fmt.Errorf("seed agent type %s: %w", t.ID, err)
			}
			t.Workspace = cfg
			if err := reg.PutAgentType(ctx, t); err != nil {
				return fmt.Errorf("seed agent type %s: %w", t.ID, err)
			}
		}
		var configs []registry.Configuration
		if err := readFixture(filepath.Join(dir, "configurations.json"), &configs); err != nil {
			return err
		}
		for _, c := range configs {
			if err := reg.PutConfiguration(ctx, c); err != nil {
				return fmt.Errorf("seed configuration %s: %w", c.ID, err)
			}
		}
	}
	if appKey != "" {
		if err := reg.PutAppKey(ctx, registry.AppKey{ID: "dev", Label: "development app key", Hash: token.Hash(appKey), Tenant: DevTenant}); err != nil {
			return fmt.Errorf("seed app key: %w", err)
		}
	}
	return nil
}

func readFixture(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("seed: %s: %w", path, err)
	}
	return nil
}
