// Package registry holds what operators register: projects, personas, agent types
// and the app keys that may create sessions. Types and the store interface only;
// dynamo.Registry stores them in DynamoDB.
package registry

import (
	"context"
	"errors"
)

// ErrNotFound: no such project, persona or app key.
var ErrNotFound = errors.New("not registered")

// Project is a registered project agents work for.
type Project struct {
	Name      string `json:"name"`
	CreatedAt string `json:"created_at,omitempty"`
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
}
