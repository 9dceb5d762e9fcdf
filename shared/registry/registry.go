// Package registry holds what operators register: projects, personas, agent types
// and the app keys that may create sessions. Types and the store interface only;
// dynamo.Registry stores them in DynamoDB.
package registry

import (
	"context"
	"errors"
	"time"

	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// ErrNotFound: no such project, persona or app key.
var ErrNotFound = errors.New("not registered")

// Project is a registered project agents work for.
type Project struct {
	Name      string    `json:"name"`
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
}

// AppKey lets an app create sessions. Only the key's hash is stored.
type AppKey struct {
	ID       string `json:"app_key_id"`
	Label    string `json:"label"`
	Hash     string `json:"key_hash"`
	Disabled bool   `json:"disabled"`
}

// Configuration is a repository's reusable workspace setup: what setup sessions
// record (the snapshot, service commands, env file specs) for later sessions.
type Configuration struct {
	ID              string                    `json:"configuration_id"`
	RepoName        string                    `json:"repo_name"`
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

// Store reads and writes registry items.
type Store interface {
	// Project returns the project called name, or ErrNotFound.
	Project(ctx context.Context, name string) (Project, error)
	// Persona returns the persona with slug, active or not, or ErrNotFound.
	Persona(ctx context.Context, slug string) (Persona, error)
	// AppKeyByHash returns the app key whose hash is hash, or ErrNotFound.
	AppKeyByHash(ctx context.Context, hash string) (AppKey, error)
	// PutProject, PutPersona and PutAppKey create or replace items (seeding, admin).
	PutProject(ctx context.Context, p Project) error
	PutPersona(ctx context.Context, p Persona) error
	PutAppKey(ctx context.Context, k AppKey) error
	// Configuration returns the configuration with id, or ErrNotFound.
	Configuration(ctx context.Context, id string) (Configuration, error)
	// PutConfiguration creates or replaces a configuration (seeding, admin).
	PutConfiguration(ctx context.Context, c Configuration) error
	// UpdateConfiguration sets the fields u sets of an existing configuration;
	// ErrNotFound if there is none.
	UpdateConfiguration(ctx context.Context, id string, u ConfigurationUpdate) error
}
