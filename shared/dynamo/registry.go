package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/resources"
)

var _ registry.Store = (*Registry)(nil)

// Registry stores registry items in the registry table: one item per thing,
// keyed "<kind>#<tenant>#<id>" (app keys "app_key#<hash>": they are looked up
// before the tenant is known), listed by kind through the by_kind index, whose
// sort key is "<tenant>#<id>". A tenant's names are its own: the key of
// another tenant's item is never formed from its lookups.
type Registry struct {
	// TypeQuota bounds each tenant's agent types (CreateAgentType,
	// SetWorkspaceConfig); zero: none.
	TypeQuota registry.TypeQuota

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

func regKey(kind, tenant, id string) registryKey {
	return registryKey{PK: kind + "#" + tenant + "#" + id, SK: kind}
}

func appKeyKey(hash string) registryKey {
	return registryKey{PK: kindAppKey + "#" + hash, SK: kindAppKey}
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

type configItem struct {
	registryKey
	Kind string `json:"kind"`
	Name string `json:"name"`
	registry.Configuration
}

// Project returns a project of tenant or of the platform.
func (r *Registry) Project(ctx context.Context, tenant, name string) (registry.Project, error) {
	var it projectItem
	if err := r.lookup(ctx, kindProject, tenant, name, &it); err != nil {
		return registry.Project{}, fmt.Errorf("project %q: %w", name, err)
	}
	// The item's own name attribute (the by_kind sort key) shadows the embedded
	// project's on decode.
	it.Project.Name = name
	return it.Project, nil
}

// Persona returns a persona of tenant or of the platform.
func (r *Registry) Persona(ctx context.Context, tenant, slug string) (registry.Persona, error) {
	var it personaItem
	if err := r.lookup(ctx, kindPersona, tenant, slug, &it); err != nil {
		return registry.Persona{}, fmt.Errorf("persona %q: %w", slug, err)
	}
	return it.Persona, nil
}

// AppKeyByHash returns an app key by the hash of its secret.
func (r *Registry) AppKeyByHash(ctx context.Context, hash string) (registry.AppKey, error) {
	var it appKeyItem
	if err := r.get(ctx, appKeyKey(hash), &it); err != nil {
		return registry.AppKey{}, fmt.Errorf("app key: %w", err)
	}
	return it.AppKey, nil
}

// PutProject stores a project of its tenant.
func (r *Registry) PutProject(ctx context.Context, p registry.Project) error {
	p.Tenant = registry.Owner(p.Tenant)
	if err := registry.ValidTenant(p.Tenant); err != nil {
		return fmt.Errorf("put project %q: %w", p.Name, err)
	}
	return r.t.Put(ctx, projectItem{registryKey: regKey(kindProject, p.Tenant, p.Name), Kind: kindProject, Name: p.Tenant + "#" + p.Name, Project: p})
}

// PutPersona stores a persona of its tenant.
func (r *Registry) PutPersona(ctx context.Context, p registry.Persona) error {
	p.Tenant = registry.Owner(p.Tenant)
	if err := registry.ValidTenant(p.Tenant); err != nil {
		return fmt.Errorf("put persona %q: %w", p.Slug, err)
	}
	return r.t.Put(ctx, personaItem{registryKey: regKey(kindPersona, p.Tenant, p.Slug), Kind: kindPersona, Name: p.Tenant + "#" + p.Slug, Persona: p})
}

// PutAppKey stores an app key under its hash.
func (r *Registry) PutAppKey(ctx context.Context, k registry.AppKey) error {
	if k.Hash == "" {
		return errors.New("app key without hash")
	}
	if err := registry.ValidTenant(k.Tenant); err != nil || k.Tenant == registry.Platform {
		return fmt.Errorf("app key %q: its tenant %q is not one an app can be", k.ID, k.Tenant)
	}
	return r.t.Put(ctx, appKeyItem{registryKey: appKeyKey(k.Hash), Kind: kindAppKey, Name: k.Tenant + "#" + k.ID, AppKey: k})
}

// Configuration returns a configuration of tenant or of the platform.
func (r *Registry) Configuration(ctx context.Context, tenant, id string) (registry.Configuration, error) {
	var it configItem
	if err := r.lookup(ctx, kindConfig, tenant, id, &it); err != nil {
		return registry.Configuration{}, fmt.Errorf("configuration %q: %w", id, err)
	}
	return it.Configuration, nil
}

// PutConfiguration stores a configuration of its tenant.
func (r *Registry) PutConfiguration(ctx context.Context, c registry.Configuration) error {
	c.Tenant = registry.Owner(c.Tenant)
	if err := registry.ValidTenant(c.Tenant); err != nil {
		return fmt.Errorf("put configuration %q: %w", c.ID, err)
	}
	return r.t.Put(ctx, configItem{registryKey: regKey(kindConfig, c.Tenant, c.ID), Kind: kindConfig, Name: c.Tenant + "#" + c.ID, Configuration: c})
}

// UpdateConfiguration sets fields of an existing configuration of tenant.
func (r *Registry) UpdateConfiguration(ctx context.Context, tenant, id string, u registry.ConfigurationUpdate) error {
	if !ownTenant(tenant) {
		return fmt.Errorf("configuration %q: %w", id, registry.ErrNotFound)
	}
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
	err := r.t.Update(ctx, regKey(kindConfig, tenant, id), upd, nil, expression.AttributeExists(expression.Name("pk")))
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("configuration %q: %w", id, registry.ErrNotFound)
	}
	return err
}

// lookup reads the item of kind called id that tenant may use into out: its
// own, or else the platform's.
func (r *Registry) lookup(ctx context.Context, kind, tenant, id string, out any) error {
	owners := []string{registry.Platform}
	if ownTenant(tenant) {
		owners = []string{tenant, registry.Platform}
	} else if tenant != "" && tenant != registry.Platform {
		// Not a tenant anybody can have: its key is never formed.
		return registry.ErrNotFound
	}
	for _, owner := range owners {
		if err := r.get(ctx, regKey(kind, owner, id), out); !errors.Is(err, registry.ErrNotFound) {
			return err
		}
	}
	return registry.ErrNotFound
}

// ownTenant reports whether tenant is one that owns items it may change.
func ownTenant(tenant string) bool {
	return tenant != registry.Platform && registry.ValidTenant(tenant) == nil
}

func (r *Registry) get(ctx context.Context, key registryKey, out any) error {
	err := r.t.Get(ctx, key, out)
	if errors.Is(err, ErrNotFound) {
		return registry.ErrNotFound
	}
	return err
}

// MaxListedTenants bounds Tenants: the app keys it reads.
const MaxListedTenants = 10000

// Tenants lists the tenants of the app keys, each once: one query of the
// by_kind index (names "<tenant>#<key id>"), at most MaxListedTenants keys.
func (r *Registry) Tenants(ctx context.Context) ([]string, error) {
	key := expression.Key("kind").Equal(expression.Value(kindAppKey))
	seen := map[string]bool{}
	var out []string
	var after Cursor
	for n := 0; n < MaxListedTenants; {
		var page []struct {
			Name string `json:"name"`
		}
		next, err := r.t.Query(ctx, Query{Index: resources.RegistryByKind, Key: key, After: after}, &page)
		if err != nil {
			return nil, fmt.Errorf("list the app keys' tenants: %w", err)
		}
		for _, it := range page {
			if tenant, _, ok := strings.Cut(it.Name, "#"); ok && !seen[tenant] {
				seen[tenant] = true
				out = append(out, tenant)
			}
		}
		n += len(page)
		if after = next; after == "" {
			break
		}
	}
	return out, nil
}

// SetAppKeyLimits replaces the limits of the app key whose hash is hash (an
// enabled one), and returns the key as changed; registry.ErrNotFound
// otherwise.
func (r *Registry) SetAppKeyLimits(ctx context.Context, hash string, l registry.AppKeyLimits) (registry.AppKey, error) {
	up := expression.Set(expression.Name("max_cost_usd_per_day"), expression.Value(l.MaxCostUSDPerDay)).
		Set(expression.Name("max_cost_usd_per_month"), expression.Value(l.MaxCostUSDPerMonth))
	if l.Limits != nil {
		up = up.Set(expression.Name("limits"), Value(*l.Limits))
	} else {
		up = up.Remove(expression.Name("limits"))
	}
	disabled := expression.Name("disabled")
	cond := expression.AttributeExists(expression.Name("pk")).And(expression.Or(expression.AttributeNotExists(disabled), disabled.Equal(expression.Value(false))))
	var it appKeyItem
	err := r.t.Update(ctx, appKeyKey(hash), up, &it, cond)
	if errors.Is(err, ErrConditionFailed) {
		return registry.AppKey{}, fmt.Errorf("app key: %w", registry.ErrNotFound)
	}
	if err != nil {
		return registry.AppKey{}, err
	}
	return it.AppKey, nil
}
