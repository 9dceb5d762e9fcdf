// Package agenttype manages agent types for apps: create, list, read, and
// their workspace configuration, validated (tools, repository source, a size
// a Fargate task can have), each app in its own tenant. A tenant's types are
// its own; platform types (the seeded "default") are every tenant's to use and
// nobody's to change. Resolve gives session create the configuration a new
// session copies, with the platform's defaults filled in, so a later change
// of the type affects only sessions created after it.
package agenttype

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// Options configure a Service.
type Options struct {
	Registry registry.AgentTypes
	// Defaults are the resource limits of a type that sets none (every part
	// set: config.Platform's WorkspaceDefaults).
	Defaults registry.ResourceLimits
	// GitInsecureHosts are the hosts a fixed repository may name over plain
	// http or git (config git_insecure_hosts); nil: none.
	GitInsecureHosts []string
	// Pool counts a type's warm pool, for Get; nil shows none.
	Pool PoolCounter
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// PoolCounter counts the warm pool of a type, resolved (pool.Service).
type PoolCounter interface {
	Count(ctx context.Context, t registry.AgentType) (idle, starting int, err error)
}

// WarmPool is a type's warm pool as Get shows it: its size, and how many of
// its sandboxes are idle (ready to be claimed) and starting.
type WarmPool struct {
	Size     int `json:"size"`
	Idle     int `json:"idle"`
	Starting int `json:"starting"`
}

// Service runs the agent type operations.
type Service struct {
	o Options
}

// New returns a service with options o.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o}
}

// CreateRequest is a new agent type: an id, a name and, optionally, its
// workspace configuration (none: no workspace, enabled false).
type CreateRequest struct {
	ID              string                    `json:"id"`
	Name            string                    `json:"name"`
	WorkspaceConfig *registry.WorkspaceConfig `json:"workspace_config,omitempty"`
}

// View is an agent type as apps see it.
type View struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Platform types are every tenant's to use and nobody's to change.
	Platform        bool                     `json:"platform"`
	WorkspaceConfig registry.WorkspaceConfig `json:"workspace_config"`
	CreatedAt       time.Time                `json:"created_at,omitzero"`
	UpdatedAt       time.Time                `json:"updated_at,omitzero"`
	// WarmPool is the type's warm pool (on Get only).
	WarmPool *WarmPool `json:"warm_pool,omitempty"`
}

// List is the list route's answer.
type List struct {
	AgentTypes []View `json:"agent_types"`
}

func viewOf(t registry.AgentType) View {
	return View{ID: t.ID, Name: t.Name, Platform: t.Tenant == registry.Platform, WorkspaceConfig: normalized(t.Workspace),
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// normalized writes a stored configuration as apps see it: lists, never null;
// a repository source type, a setup timeout, an egress policy (open, for a
// type stored before policies).
func normalized(c registry.WorkspaceConfig) registry.WorkspaceConfig {
	if c.Egress == nil {
		open := egress.Open()
		c.Egress = &open
	}
	if c.Tools == nil {
		c.Tools = []string{}
	}
	if c.SetupCommands == nil {
		c.SetupCommands = []string{}
	}
	if c.RepoSource.Type == "" {
		c.RepoSource.Type = registry.RepoNone
	}
	if c.SetupTimeoutSeconds == 0 {
		c.SetupTimeoutSeconds = DefaultSetupTimeout
	}
	return c
}

// NotFound is the error of an agent type the tenant may not use: unknown, or
// another tenant's (the same words for both).
func NotFound(id string) error {
	if !ValidID(id) {
		return apierror.New(apierror.AgentTypeNotFound, "No agent type has that id.")
	}
	return apierror.New(apierror.AgentTypeNotFound, "No agent type has the id %q.", id)
}

// Create stores a new agent type of app's tenant.
func (s *Service) Create(ctx context.Context, app registry.AppKey, req CreateRequest) (View, error) {
	if err := checkID(req.ID); err != nil {
		return View{}, err
	}
	if err := checkName(req.Name); err != nil {
		return View{}, err
	}
	var cfg registry.WorkspaceConfig
	if req.WorkspaceConfig != nil {
		cfg = *req.WorkspaceConfig
	}
	cfg, err := ValidateWith(cfg, s.o.Defaults, s.o.GitInsecureHosts)
	if err != nil {
		return View{}, err
	}
	now := s.o.Now().UTC()
	t := registry.AgentType{ID: req.ID, Name: req.Name, Tenant: app.Tenant, Workspace: cfg, CreatedAt: now, UpdatedAt: now}
	if err := s.o.Registry.CreateAgentType(ctx, t); err != nil {
		if errors.Is(err, registry.ErrExists) {
			return View{}, apierror.New(apierror.AgentTypeExists, "An agent type with the id %q exists already.", req.ID)
		}
		if q := overQuota(err); q != nil {
			return View{}, q
		}
		return View{}, fmt.Errorf("create agent type: %w", err)
	}
	return viewOf(t), nil
}

// List returns the types app's tenant may use: its own, then the platform's,
// each by id.
func (s *Service) List(ctx context.Context, app registry.AppKey) (List, error) {
	types, err := s.o.Registry.ListAgentTypes(ctx, app.Tenant)
	if err != nil {
		return List{}, fmt.Errorf("list agent types: %w", err)
	}
	out := List{AgentTypes: make([]View, 0, len(types))}
	for _, t := range types {
		out.AgentTypes = append(out.AgentTypes, viewOf(t))
	}
	slices.SortStableFunc(out.AgentTypes, func(a, b View) int {
		if a.Platform != b.Platform {
			if a.Platform {
				return 1
			}
			return -1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Get returns the type id that app's tenant may use, with its warm pool.
func (s *Service) Get(ctx context.Context, app registry.AppKey, id string) (View, error) {
	t, err := s.lookup(ctx, app.Tenant, id)
	if err != nil {
		return View{}, err
	}
	v := viewOf(t)
	if s.o.Pool != nil {
		// Counted against the configuration sessions of it copy.
		resolved := t
		resolved.Workspace = normalized(t.Workspace)
		resolved.Workspace.ResourceLimits = Effective(t.Workspace.ResourceLimits, s.o.Defaults)
		idle, starting, err := s.o.Pool.Count(ctx, resolved)
		if err != nil {
			return View{}, fmt.Errorf("count the warm pool of %s: %w", id, err)
		}
		v.WarmPool = &WarmPool{Size: t.Workspace.WarmPoolSize, Idle: idle, Starting: starting}
	}
	return v, nil
}

// WorkspaceConfig returns the workspace configuration of type id, as stored:
// a resource limit it leaves out is the platform's default.
func (s *Service) WorkspaceConfig(ctx context.Context, app registry.AppKey, id string) (registry.WorkspaceConfig, error) {
	t, err := s.lookup(ctx, app.Tenant, id)
	if err != nil {
		return registry.WorkspaceConfig{}, err
	}
	return normalized(t.Workspace), nil
}

// SetWorkspaceConfig validates c and replaces the workspace configuration of
// app's tenant's own type id with it: sessions created after it get it, those
// created before keep theirs. A platform type is 403 forbidden: the tenant
// sees it, but may not change it.
func (s *Service) SetWorkspaceConfig(ctx context.Context, app registry.AppKey, id string, c registry.WorkspaceConfig) (registry.WorkspaceConfig, error) {
	t, err := s.lookup(ctx, app.Tenant, id)
	if err != nil {
		return registry.WorkspaceConfig{}, err
	}
	if t.Tenant == registry.Platform {
		return registry.WorkspaceConfig{}, apierror.New(apierror.Forbidden, "Agent type %q is a platform type: every app may use it, none may change it. Create a type of your own.", id)
	}
	c, err = ValidateWith(c, s.o.Defaults, s.o.GitInsecureHosts)
	if err != nil {
		return registry.WorkspaceConfig{}, err
	}
	if err := s.o.Registry.SetWorkspaceConfig(ctx, app.Tenant, id, c, s.o.Now().UTC()); err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return registry.WorkspaceConfig{}, NotFound(id)
		}
		if q := overQuota(err); q != nil {
			return registry.WorkspaceConfig{}, q
		}
		return registry.WorkspaceConfig{}, fmt.Errorf("set workspace config: %w", err)
	}
	return c, nil
}

// Resolve returns the agent type id of tenant with the workspace a session
// of it starts with: every resource limit set (the type's, else the
// default's), the setup timeout set, lists never null. An unknown type, or
// another tenant's, is agent_type_not_found.
func (s *Service) Resolve(ctx context.Context, tenant, id string) (registry.AgentType, error) {
	t, err := s.lookup(ctx, tenant, id)
	if err != nil {
		return registry.AgentType{}, err
	}
	t.Workspace = normalized(t.Workspace)
	t.Workspace.ResourceLimits = Effective(t.Workspace.ResourceLimits, s.o.Defaults)
	return t, nil
}

// Pooled returns the agent types of every owner that keep a warm pool, each
// resolved as Resolve resolves it (what a session of it copies).
func (s *Service) Pooled(ctx context.Context) ([]registry.AgentType, error) {
	types, err := s.o.Registry.PooledAgentTypes(ctx)
	if err != nil {
		return nil, err
	}
	for i := range types {
		types[i].Workspace = normalized(types[i].Workspace)
		types[i].Workspace.ResourceLimits = Effective(types[i].Workspace.ResourceLimits, s.o.Defaults)
	}
	return types, nil
}

func (s *Service) lookup(ctx context.Context, tenant, id string) (registry.AgentType, error) {
	if !ValidID(id) {
		return registry.AgentType{}, NotFound(id)
	}
	t, err := s.o.Registry.AgentType(ctx, tenant, id)
	if errors.Is(err, registry.ErrNotFound) {
		return registry.AgentType{}, NotFound(id)
	}
	if err != nil {
		return registry.AgentType{}, fmt.Errorf("look up agent type: %w", err)
	}
	return t, nil
}

// overQuota is the 429 quota_exceeded of a type write that err says would
// pass its tenant's quota; nil for another error.
func overQuota(err error) error {
	var qe *registry.QuotaError
	if !errors.As(err, &qe) {
		return nil
	}
	msg := fmt.Sprintf("This app keeps %d agent types, its quota; change one instead.", qe.Limit)
	if qe.Quota == registry.QuotaWarmSandboxes {
		msg = fmt.Sprintf("This app's agent types would keep more than %d warm sandboxes together, its quota; make a pool smaller first.", qe.Limit)
	}
	return &apierror.Error{Code: apierror.QuotaExceeded, Details: map[string]any{"quota": qe.Quota, "limit": qe.Limit}, Message: msg}
}
