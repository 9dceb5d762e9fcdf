package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/egress"
)

// ErrExists: an item of that id exists already.
var ErrExists = errors.New("already registered")

// TypeQuota bounds a tenant's agent types: how many it keeps, and the
// sandboxes their warm pools keep together (the sum of warm_pool_size); 0
// is no bound.
type TypeQuota struct {
	Types, PoolSandboxes int
}

// The quotas a TypeQuota holds, as QuotaError names them.
const (
	QuotaAgentTypes    = "agent_types"
	QuotaWarmSandboxes = "warm_sandboxes"
)

// ErrOverQuota: a create or change of an agent type would pass its
// tenant's TypeQuota (see QuotaError).
var ErrOverQuota = errors.New("over quota")

// QuotaError is the ErrOverQuota of a type's write: the quota and its limit.
type QuotaError struct {
	Quota string
	Limit int
}

func (e *QuotaError) Error() string { return fmt.Sprintf("over the %s quota of %d", e.Quota, e.Limit) }

// Unwrap makes a QuotaError an ErrOverQuota.
func (e *QuotaError) Unwrap() error { return ErrOverQuota }

// DefaultAgentType is the id of the seeded platform agent type: a workspace,
// no repository, every tool.
const DefaultAgentType = "default"

// Repository sources of a workspace.
const (
	// RepoTaskContext clones the repository of the session's task context,
	// if it names one.
	RepoTaskContext = "task_context"
	// RepoFixed clones the type's own repository, whatever the task says.
	RepoFixed = "fixed"
	// RepoNone clones nothing: an empty workspace.
	RepoNone = "none"
)

// AgentType is a kind of agent: what its sessions' workspaces are made of.
// Personas name one; a create may name another.
type AgentType struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Tenant owns the type ("" or Platform: every tenant's, nobody's to change).
	Tenant    string          `json:"tenant,omitempty"`
	Workspace WorkspaceConfig `json:"workspace_config"`
	CreatedAt time.Time       `json:"created_at,omitempty,omitzero"`
	UpdatedAt time.Time       `json:"updated_at,omitempty,omitzero"`
}

// WorkspaceConfig is an agent type's workspace, declared once and copied onto
// each session at its create. The zero value is no workspace (enabled false).
type WorkspaceConfig struct {
	Enabled    bool       `json:"enabled"`
	RepoSource RepoSource `json:"repo_source"`
	// Tools are the workspace tools its agents get (toolspec.WorkspaceTools).
	Tools []string `json:"tools"`
	// ResourceLimits are the type's own; a part it leaves empty is the
	// platform's default (WORKSPACE_DEFAULT_*).
	ResourceLimits ResourceLimits `json:"resource_limits"`
	// CheckoutOnStart says whether the repository is cloned when the
	// workspace starts (nil: the default, it is); false makes the workspace
	// an empty repository whose origin and branch are the repository's, for
	// the agent to pull when it needs it (Checkout).
	CheckoutOnStart *bool `json:"checkout_on_start,omitempty"`
	// BaseImage is the container image the sandbox runs, the agent mounted
	// into it ("": the platform's image).
	BaseImage     string   `json:"base_image,omitempty"`
	SetupCommands []string `json:"setup_commands"`
	// SetupTimeoutSeconds bounds each setup command.
	SetupTimeoutSeconds int `json:"setup_timeout_seconds"`
	// WarmPoolSize is how many idle sandboxes of the type to keep (stored;
	// the warm pool uses it).
	WarmPoolSize int `json:"warm_pool_size"`
	// SessionLimits bound each session of the type (with the platform's:
	// the lower of the two holds); nil: the platform's only.
	SessionLimits *SessionLimits `json:"session_limits,omitempty"`
	// Egress is what its sandboxes may reach (nil: a type stored before
	// egress policies, open); a type created without one gets
	// egress.Default.
	Egress *egress.Policy `json:"egress,omitempty"`
	// Secrets name the tenant's secrets its sandboxes' requests carry,
	// added by the egress proxy where their rules say (never in the
	// sandbox).
	Secrets []string `json:"secrets,omitempty"`
	// OnIdle is what its agents do at their idle limit: OnIdleEnd (""
	// too, a type stored before it) or OnIdlePause (a checkpoint, then no
	// sandbox, until a resume).
	OnIdle string `json:"on_idle,omitempty"`
	// ResumeOnMessage resumes a paused agent of the type when a message is
	// sent to it.
	ResumeOnMessage bool `json:"resume_on_message,omitempty"`
	// CheckpointRetentionDays is how long its agents' checkpoints are kept
	// (0: DefaultCheckpointRetentionDays); an agent's last is kept as long
	// as the agent is.
	CheckpointRetentionDays int `json:"checkpoint_retention_days,omitempty"`
}

// DefaultCheckpointRetentionDays is a type's checkpoint_retention_days
// when it sets none.
const DefaultCheckpointRetentionDays = 7

// CheckpointRetention is how long c's agents' checkpoints are kept.
func (c WorkspaceConfig) CheckpointRetention() time.Duration {
	return time.Duration(cmp.Or(c.CheckpointRetentionDays, DefaultCheckpointRetentionDays)) * 24 * time.Hour
}

// What an agent does at its idle limit (WorkspaceConfig.OnIdle).
const (
	OnIdleEnd   = "end"
	OnIdlePause = "pause"
)

// secretName is what names a secret.
var secretName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidSecretName reports whether n can name a secret: 1 to 64 letters,
// digits, '_', '-' or '.', starting with a letter or digit.
func ValidSecretName(n string) bool { return secretName.MatchString(n) }

// endUser is what names an app's user.
var endUser = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,127}$`)

// ValidEndUser reports whether u can name an app's user (create's
// end_user, a secret's): 1 to 128 letters, digits, '_', '-', '.', '@' or
// ':', starting with a letter or digit.
func ValidEndUser(u string) bool { return endUser.MatchString(u) }

// EgressPolicy is c's egress policy: open when it has none.
func (c WorkspaceConfig) EgressPolicy() egress.Policy {
	if c.Egress == nil {
		return egress.Open()
	}
	return *c.Egress
}

// Checkout reports whether the repository is cloned when the workspace
// starts: unless checkout_on_start says false.
func (c WorkspaceConfig) Checkout() bool { return c.CheckoutOnStart == nil || *c.CheckoutOnStart }

// MarshalJSON writes c with every field: checkout_on_start as it holds (true
// when left out), base_image null when unset (the platform's image), and
// resume_on_message, not left out.
func (c WorkspaceConfig) MarshalJSON() ([]byte, error) {
	type fields WorkspaceConfig // without this method
	var base *string
	if c.BaseImage != "" {
		base = &c.BaseImage
	}
	return json.Marshal(struct {
		fields
		CheckoutOnStart bool    `json:"checkout_on_start"`
		BaseImage       *string `json:"base_image"`
		ResumeOnMessage bool    `json:"resume_on_message"`
	}{fields(c), c.Checkout(), base, c.ResumeOnMessage})
}

// SessionLimits bound one session: its time, its idle time, its model
// tokens and their cost. A zero part is no bound of this level.
type SessionLimits struct {
	MaxSessionSeconds  int   `json:"max_session_seconds,omitempty"`
	IdleTimeoutSeconds int   `json:"idle_timeout_seconds,omitempty"`
	MaxTokens          int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD bounds what its model calls cost (the price table's).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// MaxLimitSeconds bounds a session limit's seconds (30 days).
const MaxLimitSeconds = 30 * 24 * 3600

// Problem says what is wrong with l, named under prefix
// ("session_limits."), "" when nothing.
func (l SessionLimits) Problem(prefix string) string {
	switch {
	case l.MaxSessionSeconds < 0 || l.MaxSessionSeconds > MaxLimitSeconds || l.IdleTimeoutSeconds < 0 || l.IdleTimeoutSeconds > MaxLimitSeconds:
		return fmt.Sprintf("%smax_session_seconds and idle_timeout_seconds must be from 0 (none) to %d.", prefix, MaxLimitSeconds)
	case l.MaxTokens < 0:
		return prefix + "max_tokens must be 0 (none) or more."
	case !config.ValidUSD(l.MaxCostUSD):
		return fmt.Sprintf("%smax_cost_usd must be from 0 (none) to %d.", prefix, config.MaxUSD)
	}
	return ""
}

// RepoSource says which repository a workspace clones.
type RepoSource struct {
	// Type is RepoTaskContext, RepoFixed or RepoNone.
	Type string `json:"type"`
	// URL is the repository of RepoFixed.
	URL string `json:"url,omitempty"`
	// Branch is the default branch (the task's branch wins over it).
	Branch string `json:"branch,omitempty"`
}

// ResourceLimits are a workspace's CPU (vCPUs, e.g. "2"), memory (e.g. "4G")
// and disk (e.g. "40G"); "" is the default.
type ResourceLimits struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	Disk   string `json:"disk,omitempty"`
}

// AgentTypes reads and writes agent types. Lookups take the caller's tenant
// and find its own types and platform types; another tenant's is ErrNotFound.
type AgentTypes interface {
	// AgentType returns the type with id that tenant may use, or ErrNotFound.
	AgentType(ctx context.Context, tenant, id string) (AgentType, error)
	// ListAgentTypes returns the types tenant may use: its own and the
	// platform's, by id.
	ListAgentTypes(ctx context.Context, tenant string) ([]AgentType, error)
	// CreateAgentType stores a new type of the tenant it names; ErrExists if
	// that tenant, or the platform, has one of its id; a QuotaError if the
	// tenant's types would pass its quota.
	CreateAgentType(ctx context.Context, t AgentType) error
	// PutAgentType creates or replaces a type of the tenant it names (seeding).
	PutAgentType(ctx context.Context, t AgentType) error
	// SetWorkspaceConfig replaces the workspace configuration of tenant's own
	// type id; ErrNotFound if tenant has none (a platform type is nobody's to
	// change); a QuotaError if its warm pool would pass the tenant's quota.
	SetWorkspaceConfig(ctx context.Context, tenant, id string, c WorkspaceConfig, at time.Time) error
	// PooledAgentTypes returns every owner's types that keep a warm pool
	// (warm_pool_size above 0).
	PooledAgentTypes(ctx context.Context) ([]AgentType, error)
}
