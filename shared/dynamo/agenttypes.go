package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/resources"
)

// kindAgentType is the kind attribute of agent types.
const kindAgentType = "agent_type"

// MaxListedAgentTypes bounds how many of one owner's agent types a list
// returns: a list reads at most this many of the tenant's and as many of the
// platform's, never an unbounded result.
const MaxListedAgentTypes = 1000

// agentTypeItem is an agent type as stored. Its fields are spelled out, not
// embedded: the type's name would collide with the by_kind sort key "name".
type agentTypeItem struct {
	registryKey
	Kind      string                   `json:"kind"`
	Name      string                   `json:"name"`
	ID        string                   `json:"id"`
	Display   string                   `json:"display_name"`
	Tenant    string                   `json:"tenant"`
	Workspace registry.WorkspaceConfig `json:"workspace_config"`
	CreatedAt time.Time                `json:"created_at,omitzero"`
	UpdatedAt time.Time                `json:"updated_at,omitzero"`
}

func agentTypeItemOf(t registry.AgentType) agentTypeItem {
	return agentTypeItem{
		registryKey: regKey(kindAgentType, t.Tenant, t.ID), Kind: kindAgentType, Name: t.Tenant + "#" + t.ID,
		ID: t.ID, Display: t.Name, Tenant: t.Tenant, Workspace: t.Workspace, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

func (it agentTypeItem) agentType() registry.AgentType {
	return registry.AgentType{ID: it.ID, Name: it.Display, Tenant: it.Tenant, Workspace: it.Workspace, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt}
}

// AgentType returns an agent type of tenant or of the platform.
func (r *Registry) AgentType(ctx context.Context, tenant, id string) (registry.AgentType, error) {
	var it agentTypeItem
	if err := r.lookup(ctx, kindAgentType, tenant, id, &it); err != nil {
		return registry.AgentType{}, fmt.Errorf("agent type %q: %w", id, err)
	}
	return it.agentType(), nil
}

// ListAgentTypes returns tenant's agent types, then the platform's, each by
// id: one query of the by_kind index per owner, never a scan.
func (r *Registry) ListAgentTypes(ctx context.Context, tenant string) ([]registry.AgentType, error) {
	owners := []string{registry.Platform}
	if ownTenant(tenant) {
		owners = []string{tenant, registry.Platform}
	} else if tenant != "" && tenant != registry.Platform {
		return nil, nil
	}
	var out []registry.AgentType
	for _, owner := range owners {
		key := expression.Key("kind").Equal(expression.Value(kindAgentType)).
			And(expression.Key("name").BeginsWith(owner + "#"))
		var after Cursor
		for n := 0; n < MaxListedAgentTypes; {
			var page []agentTypeItem
			next, err := r.t.Query(ctx, Query{Index: resources.RegistryByKind, Key: key, After: after, Limit: min(DefaultPageSize, MaxListedAgentTypes-n)}, &page)
			if err != nil {
				return nil, fmt.Errorf("list agent types of %s: %w", owner, err)
			}
			for _, it := range page {
				out = append(out, it.agentType())
			}
			n += len(page)
			if after = next; after == "" {
				break
			}
		}
	}
	return out, nil
}

// PooledAgentTypes returns every owner's agent types whose warm pool size is
// above 0: one query of the by_kind index (at most MaxListedAgentTypes read).
func (r *Registry) PooledAgentTypes(ctx context.Context) ([]registry.AgentType, error) {
	key := expression.Key("kind").Equal(expression.Value(kindAgentType))
	filter := expression.Name("workspace_config.warm_pool_size").GreaterThan(expression.Value(0))
	var out []registry.AgentType
	var after Cursor
	for n := 0; n < MaxListedAgentTypes; {
		var page []agentTypeItem
		next, err := r.t.Query(ctx, Query{Index: resources.RegistryByKind, Key: key, Filter: &filter, After: after, Limit: min(DefaultPageSize, MaxListedAgentTypes-n)}, &page)
		if err != nil {
			return nil, fmt.Errorf("list pooled agent types: %w", err)
		}
		for _, it := range page {
			out = append(out, it.agentType())
		}
		n += DefaultPageSize
		if after = next; after == "" {
			break
		}
	}
	return out, nil
}

// CreateAgentType stores a new agent type of its tenant, unless the tenant
// or the platform has one of its id.
func (r *Registry) CreateAgentType(ctx context.Context, t registry.AgentType) error {
	t.Tenant = registry.Owner(t.Tenant)
	if err := registry.ValidTenant(t.Tenant); err != nil {
		return fmt.Errorf("create agent type %q: %w", t.ID, err)
	}
	if t.Tenant != registry.Platform {
		// A tenant's type never shadows a platform type of the same id.
		var it agentTypeItem
		err := r.get(ctx, regKey(kindAgentType, registry.Platform, t.ID), &it)
		if err == nil {
			return fmt.Errorf("agent type %q: %w", t.ID, registry.ErrExists)
		}
		if !errors.Is(err, registry.ErrNotFound) {
			return fmt.Errorf("agent type %q: %w", t.ID, err)
		}
	}
	isNew := expression.AttributeNotExists(expression.Name("pk"))
	q := r.TypeQuota
	if t.Tenant == registry.Platform || (q.Types <= 0 && q.PoolSandboxes <= 0) {
		err := r.t.Put(ctx, agentTypeItemOf(t), isNew)
		if errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("agent type %q: %w", t.ID, registry.ErrExists)
		}
		return err
	}
	// The type and its tenant's count in one transaction: of racing creates
	// at the quota, those that fit are written.
	size := t.Workspace.WarmPoolSize
	if q.PoolSandboxes > 0 && size > q.PoolSandboxes {
		return fmt.Errorf("agent type %q: %w", t.ID, &registry.QuotaError{Quota: registry.QuotaWarmSandboxes, Limit: q.PoolSandboxes})
	}
	types, pool := expression.Name("types"), expression.Name("pool")
	up := expression.Add(types, expression.Value(1)).Add(pool, expression.Value(size))
	var conds []expression.ConditionBuilder
	if q.Types > 0 {
		conds = append(conds, expression.AttributeNotExists(types).Or(types.LessThan(expression.Value(q.Types))))
	}
	if q.PoolSandboxes > 0 && size > 0 {
		conds = append(conds, expression.AttributeNotExists(pool).Or(pool.LessThanEqual(expression.Value(q.PoolSandboxes-size))))
	}
	err := Transact(ctx, r.t.api, "", r.t.PutOp(agentTypeItemOf(t), isNew), r.t.UpdateOp(typeCountKey(t.Tenant), up, allOf(conds)...))
	var canceled *TxCanceledError
	switch {
	case errors.As(err, &canceled) && len(canceled.Reasons) == 2 && canceled.Reasons[0] == "ConditionalCheckFailed":
		return fmt.Errorf("agent type %q: %w", t.ID, registry.ErrExists)
	case errors.As(err, &canceled) && len(canceled.Reasons) == 2 && canceled.Reasons[1] == "ConditionalCheckFailed":
		return fmt.Errorf("agent type %q: %w", t.ID, r.overQuota(ctx, t.Tenant))
	case err != nil:
		return fmt.Errorf("agent type %q: %w", t.ID, err)
	}
	return nil
}

// typeCounts are a tenant's agent types and their warm pools' sizes
// together, kept by its types' creates and changes when a TypeQuota
// bounds them ("agent_type_count#<tenant>").
type typeCounts struct {
	Types int `json:"types"`
	Pool  int `json:"pool"`
}

func typeCountKey(tenant string) registryKey {
	return registryKey{PK: kindAgentType + "_count#" + tenant, SK: kindAgentType + "_count"}
}

// overQuota is the QuotaError of a tenant's type write that its count
// refused: which quota it is at.
func (r *Registry) overQuota(ctx context.Context, tenant string) error {
	var c typeCounts
	if err := r.get(ctx, typeCountKey(tenant), &c); err != nil && !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	if q := r.TypeQuota; q.Types > 0 && c.Types >= q.Types {
		return &registry.QuotaError{Quota: registry.QuotaAgentTypes, Limit: q.Types}
	}
	return &registry.QuotaError{Quota: registry.QuotaWarmSandboxes, Limit: r.TypeQuota.PoolSandboxes}
}

// allOf is conds joined by and (none: nil).
func allOf(conds []expression.ConditionBuilder) []expression.ConditionBuilder {
	if len(conds) < 2 {
		return conds
	}
	return []expression.ConditionBuilder{expression.And(conds[0], conds[1], conds[2:]...)}
}

// PutAgentType stores an agent type of its tenant, replacing any.
func (r *Registry) PutAgentType(ctx context.Context, t registry.AgentType) error {
	t.Tenant = registry.Owner(t.Tenant)
	if err := registry.ValidTenant(t.Tenant); err != nil {
		return fmt.Errorf("put agent type %q: %w", t.ID, err)
	}
	return r.t.Put(ctx, agentTypeItemOf(t))
}

// SetWorkspaceConfig replaces the workspace configuration of tenant's own
// agent type id.
func (r *Registry) SetWorkspaceConfig(ctx context.Context, tenant, id string, c registry.WorkspaceConfig, at time.Time) error {
	if !ownTenant(tenant) {
		return fmt.Errorf("agent type %q: %w", id, registry.ErrNotFound)
	}
	upd := expression.Set(expression.Name("workspace_config"), Value(c)).
		Set(expression.Name("updated_at"), expression.Value(at.UTC().Format(time.RFC3339Nano)))
	key, exists := regKey(kindAgentType, tenant, id), expression.AttributeExists(expression.Name("pk"))
	plain := func() error { // the type alone: its pool's count does not move
		err := r.t.Update(ctx, key, upd, nil, exists)
		if errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("agent type %q: %w", id, registry.ErrNotFound)
		}
		return err
	}
	if r.TypeQuota.PoolSandboxes <= 0 {
		return plain()
	}
	// A change of the pool's size moves the tenant's count in the same
	// transaction, conditional on the size it had when read (read again
	// when another change came between).
	for range 3 {
		var cur agentTypeItem
		if err := r.get(ctx, key, &cur); err != nil {
			return fmt.Errorf("agent type %q: %w", id, err)
		}
		delta := c.WarmPoolSize - cur.Workspace.WarmPoolSize
		if delta == 0 {
			return plain()
		}
		pool := expression.Name("pool")
		same := expression.Name("workspace_config.warm_pool_size").Equal(expression.Value(cur.Workspace.WarmPoolSize))
		var room []expression.ConditionBuilder
		if delta > 0 {
			room = append(room, expression.AttributeNotExists(pool).Or(pool.LessThanEqual(expression.Value(r.TypeQuota.PoolSandboxes-delta))))
		}
		err := Transact(ctx, r.t.api, "", r.t.UpdateOp(key, upd, exists.And(same)), r.t.UpdateOp(typeCountKey(tenant), expression.Add(pool, expression.Value(delta)), room...))
		var canceled *TxCanceledError
		switch {
		case errors.As(err, &canceled) && len(canceled.Reasons) == 2 && canceled.Reasons[0] == "ConditionalCheckFailed":
			continue // changed meanwhile (or gone: the read says)
		case errors.As(err, &canceled) && len(canceled.Reasons) == 2 && canceled.Reasons[1] == "ConditionalCheckFailed":
			return fmt.Errorf("agent type %q: %w", id, &registry.QuotaError{Quota: registry.QuotaWarmSandboxes, Limit: r.TypeQuota.PoolSandboxes})
		}
		return err
	}
	return fmt.Errorf("agent type %q: changed by others three times while this change was made: %w", id, ErrConditionFailed)
}
