// Package registry holds what operators register: projects, personas, agent types
// and the app keys that may create sessions. Types and the store interface only;
// dynamo.Registry stores them in DynamoDB.
//
// Every item belongs to a tenant. An app key carries its tenant; a tenant reads
// and changes only its own projects, personas and configurations. Platform items
// (tenant Platform: the seeded personas and agent types) are read by every tenant and changed by
// none. To a tenant, another tenant's item does not exist: lookups answer
// ErrNotFound, exactly as for a name nobody registered, and two tenants may use
// the same name for different items.
package registry

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// ErrNotFound: no such project, persona, configuration or app key, or one of
// another tenant.
var ErrNotFound = errors.New("not registered")

// Platform is the tenant of platform items: every tenant reads them, none
// changes them. An item put with no tenant is a platform item.
const Platform = "platform"

var tenantPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidTenant reports whether id can name a tenant: 1-63 lower-case letters,
// digits, '_' or '-', starting with a letter or digit.
func ValidTenant(id string) error {
	if !tenantPattern.MatchString(id) {
		return fmt.Errorf("tenant %q: want 1-63 lower-case letters, digits, '_' or '-'", id)
	}
	return nil
}

// Owner is the tenant an item put with tenant belongs to: Platform for "".
func Owner(tenant string) string {
	if tenant == "" {
		return Platform
	}
	return tenant
}

// Project is a registered project agents work for.
type Project struct {
	Name string `json:"name"`
	// Tenant owns the project ("" or Platform: every tenant's).
	Tenant    string    `json:"tenant,omitempty"`
	CreatedAt time.Time `json:"created_at,omitempty,omitzero"`
}

// Persona is who an agent is: its skill and experience are primed after the
// platform guardrails. Only active personas can be used for new agents.
type Persona struct {
	Slug       string `json:"slug"`
	Name       string `json:"display_name"`
	Skill      string `json:"skill"`
	Experience string `json:"experience"`
	Active     bool   `json:"active"`
	// AgentType names the persona's agent type; a create may name another.
	// "" is none: no workspace.
	AgentType string `json:"agent_type,omitempty"`
	// Tenant owns the persona ("" or Platform: every tenant's).
	Tenant string `json:"tenant,omitempty"`
}

// AppKey lets an app create sessions. Only the key's hash is stored.
type AppKey struct {
	ID    string `json:"app_key_id"`
	Label string `json:"label"`
	Hash  string `json:"key_hash"`
	// Tenant is whose items the key uses; never Platform.
	Tenant   string `json:"tenant"`
	Disabled bool   `json:"disabled"`
	// Limits bound each session the key creates, with the platform's and
	// its agent type's (the lower of each holds); nil: none of its own.
	Limits *SessionLimits `json:"limits,omitempty"`
	// MaxCostUSDPerDay bounds its app's model spend a UTC day, with the
	// platform's (the lower holds); 0: none of its own.
	MaxCostUSDPerDay float64 `json:"max_cost_usd_per_day,omitempty"`
	// MaxCostUSDPerMonth bounds it a UTC month, the same way.
	MaxCostUSDPerMonth float64 `json:"max_cost_usd_per_month,omitempty"`
}

// AppKeyLimits are what an app key bounds, as the app sets them (PUT
// /api/v1/limits): each session it creates (Limits) and its app's model
// spend a UTC day and month; 0 or none: the platform's alone. With the
// platform's, the lower of each holds, so an app can only narrow them.
type AppKeyLimits struct {
	Limits             *SessionLimits `json:"session_limits,omitempty"`
	MaxCostUSDPerDay   float64        `json:"max_cost_usd_per_day,omitempty"`
	MaxCostUSDPerMonth float64        `json:"max_cost_usd_per_month,omitempty"`
}

// Problem says what is wrong with l, "" when nothing.
func (l AppKeyLimits) Problem() string {
	if !config.ValidUSD(l.MaxCostUSDPerDay) || !config.ValidUSD(l.MaxCostUSDPerMonth) {
		return fmt.Sprintf("max_cost_usd_per_day and max_cost_usd_per_month must be from 0 (none) to %d.", config.MaxUSD)
	}
	if l.Limits != nil {
		return l.Limits.Problem("session_limits.")
	}
	return ""
}

// LimitsOf are k's limits.
func (k AppKey) LimitsOf() AppKeyLimits {
	return AppKeyLimits{Limits: k.Limits, MaxCostUSDPerDay: k.MaxCostUSDPerDay, MaxCostUSDPerMonth: k.MaxCostUSDPerMonth}
}

// SpendCaps are an app key's caps of its app's model spend, as a session
// keeps them from its create (USD; 0: none of the key's own).
type SpendCaps struct {
	PerDayUSD   float64 `json:"per_day_usd,omitempty"`
	PerMonthUSD float64 `json:"per_month_usd,omitempty"`
}

// Caps are k's spend caps; nil when it has none.
func (k AppKey) Caps() *SpendCaps {
	if k.MaxCostUSDPerDay <= 0 && k.MaxCostUSDPerMonth <= 0 {
		return nil
	}
	return &SpendCaps{PerDayUSD: k.MaxCostUSDPerDay, PerMonthUSD: k.MaxCostUSDPerMonth}
}

// Configuration is a repository's reusable workspace setup: what setup sessions
// record (the snapshot, service commands, env file specs) for later sessions.
type Configuration struct {
	ID       string `json:"configuration_id"`
	RepoName string `json:"repo_name"`
	// Tenant owns the configuration ("" or Platform: every tenant reads it,
	// no setup session changes it).
	Tenant          string                    `json:"tenant,omitempty"`
	Snapshot        *Snapshot                 `json:"snapshot,omitempty"`
	ServiceCommands []toolspec.ServiceCommand `json:"service_commands,omitempty"`
	// EnvFiles say which keys go into which env file; never their values.
	EnvFiles  []toolspec.EnvFile `json:"env_files,omitempty"`
	UpdatedAt time.Time          `json:"updated_at,omitempty,omitzero"`
}

// ConfigurationUpdate is what a setup session records in its configuration:
// each nil field is left as it is.
type ConfigurationUpdate struct {
	Snapshot        *Snapshot
	ServiceCommands []toolspec.ServiceCommand
	EnvFiles        []toolspec.EnvFile
	// UpdatedAt is when; zero leaves updated_at as it is.
	UpdatedAt time.Time
}

// Snapshot is a saved workspace archive.
type Snapshot struct {
	Key       string    `json:"key"`
	SizeBytes int64     `json:"size_bytes"`
	Message   string    `json:"message,omitempty"`
	SessionID string    `json:"session_id"`
	SavedAt   time.Time `json:"saved_at"`
}

// Store reads and writes registry items (agent types included). Lookups take the caller's tenant and
// find its own items and platform items; another tenant's is ErrNotFound.
type Store interface {
	AgentTypes
	// Project returns the project called name that tenant may use, or ErrNotFound.
	Project(ctx context.Context, tenant, name string) (Project, error)
	// Persona returns the persona with slug that tenant may use, active or not,
	// or ErrNotFound.
	Persona(ctx context.Context, tenant, slug string) (Persona, error)
	// AppKeyByHash returns the app key whose hash is hash, or ErrNotFound.
	AppKeyByHash(ctx context.Context, hash string) (AppKey, error)
	// PutProject, PutPersona and PutAppKey create or replace items of the
	// tenant the item names (seeding, admin); an app key needs a tenant other
	// than Platform, and a hash.
	PutProject(ctx context.Context, p Project) error
	PutPersona(ctx context.Context, p Persona) error
	PutAppKey(ctx context.Context, k AppKey) error
	// Configuration returns the configuration with id that tenant may use, or
	// ErrNotFound.
	Configuration(ctx context.Context, tenant, id string) (Configuration, error)
	// PutConfiguration creates or replaces a configuration of the tenant it
	// names (seeding, admin).
	PutConfiguration(ctx context.Context, c Configuration) error
	// UpdateConfiguration sets the fields u sets of tenant's own configuration
	// id; ErrNotFound if tenant has none (a platform configuration is nobody's
	// to change).
	UpdateConfiguration(ctx context.Context, tenant, id string, u ConfigurationUpdate) error
}
