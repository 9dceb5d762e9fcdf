package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/registry"
)

var _ registry.Store = (*Registry)(nil)

// Registry stores registry items in the registry table: one item per thing, keyed
// "<KIND>#<id>", listed by kind through the by_kind index.
type Registry struct {
	t *Table
}

// NewRegistry returns the registry stored in table.
func NewRegistry(api API, table string) *Registry {
	return &Registry{t: NewTable(api, table)}
}

// Item kinds, as stored in the kind attribute.
const (
	kindProject = "project"
	kindPersona = "persona"
	kindAppKey  = "app_key"
	kindConfig  = "configuration"
)

type registryKey struct {
	PK string `json:"pk"`
	SK string `json:"sk"`
}

func regKey(kind, id string) registryKey {
	return registryKey{PK: kind + "#" + id, SK: kind}
}

type projectItem struct {
	registryKey
	Kind string `json:"kind"`
	Name string `json:"name"`
	registry.Project
}

type personaItem struct {
	registryKey
	Kind string `json:"kind"`
	Name string `json:"name"`
	registry.Persona
}

type appKeyItem struct {
	registryKey
	Kind string `json:"kind"`
	Name string `json:"name"`
	registry.AppKey
}

// Project returns a project.
func (r *Registry) Project(ctx context.Context, name string) (registry.Project, error) {
	var it projectItem
	if err := r.get(ctx, regKey(kindProject, name), &it); err != nil {
		return registry.Project{}, fmt.Errorf("project %q: %w", name, err)
	}
	// The item's own name attribute (the by_kind sort key) shadows the embedded
	// project's on decode.
	it.Project.Name = it.Name
	return it.Project, nil
}

// Persona returns a persona.
func (r *Registry) Persona(ctx context.Context, slug string) (registry.Persona, error) {
	var it personaItem
	if err := r.get(ctx, regKey(kindPersona, slug), &it); err != nil {
		return registry.Persona{}, fmt.Errorf("persona %q: %w", slug, err)
	}
	return it.Persona, nil
}

// AppKeyByHash returns an app key by the hash of its secret.
func (r *Registry) AppKeyByHash(ctx context.Context, hash string) (registry.AppKey, error) {
	var it appKeyItem
	if err := r.get(ctx, regKey(kindAppKey, hash), &it); err != nil {
		return registry.AppKey{}, fmt.Errorf("app key: %w", err)
	}
	return it.AppKey, nil
}

// PutProject stores a project.
func (r *Registry) PutProject(ctx context.Context, p registry.Project) error {
	return r.t.Put(ctx, projectItem{registryKey: regKey(kindProject, p.Name), Kind: kindProject, Name: p.Name, Project: p})
}

// PutPersona stores a persona.
func (r *Registry) PutPersona(ctx context.Context, p registry.Persona) error {
	return r.t.Put(ctx, personaItem{registryKey: regKey(kindPersona, p.Slug), Kind: kindPersona, Name: p.Slug, Persona: p})
}

// PutAppKey stores an app key under its hash.
func (r *Registry) PutAppKey(ctx context.Context, k registry.AppKey) error {
	if k.Hash == "" {
		return errors.New("app key without hash")
	}
	return r.t.Put(ctx, appKeyItem{registryKey: regKey(kindAppKey, k.Hash), Kind: kindAppKey, Name: k.ID, AppKey: k})
}

type configItem struct {
	registryKey
	Kind string `json:"kind"`
	Name string `json:"name"`
	registry.Configuration
}

// Configuration returns a configuration.
func (r *Registry) Configuration(ctx context.Context, id string) (registry.Configuration, error) {
	var it configItem
	if err := r.get(ctx, regKey(kindConfig, id), &it); err != nil {
		return registry.Configuration{}, fmt.Errorf("configuration %q: %w", id, err)
	}
	return it.Configuration, nil
}

// PutConfiguration stores a configuration.
func (r *Registry) PutConfiguration(ctx context.Context, c registry.Configuration) error {
	return r.t.Put(ctx, configItem{registryKey: regKey(kindConfig, c.ID), Kind: kindConfig, Name: c.ID, Configuration: c})
}

// UpdateConfiguration sets fields of an existing configuration.
func (r *Registry) UpdateConfiguration(ctx context.Context, id string, u registry.ConfigurationUpdate) error {
	set := map[string]any{}
	if u.Snapshot != nil {
		set["snapshot"] = u.Snapshot
	}
	if u.ServiceCommands != nil {
		set["service_commands"] = u.ServiceCommands
	}
	if u.EnvFiles != nil {
		set["env_files"] = u.EnvFiles
	}
	if !u.UpdatedAt.IsZero() {
		set["updated_at"] = u.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	if len(set) == 0 {
		return errors.New("update configuration: nothing to set")
	}
	var upd expression.UpdateBuilder
	for i, name := range slices.Sorted(maps.Keys(set)) {
		if i == 0 {
			upd = expression.Set(expression.Name(name), Value(set[name]))
			continue
		}
		upd = upd.Set(expression.Name(name), Value(set[name]))
	}
	err := r.t.Update(ctx, regKey(kindConfig, id), upd, nil, expression.AttributeExists(expression.Name("pk")))
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("configuration %q: %w", id, registry.ErrNotFound)
	}
	return err
}

func (r *Registry) get(ctx context.Context, key registryKey, out any) error {
	err := r.t.Get(ctx, key, out)
	if errors.Is(err, ErrNotFound) {
		return registry.ErrNotFound
	}
	return err
}
