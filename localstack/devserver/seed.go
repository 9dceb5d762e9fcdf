package devserver

import (
	"context"
	"io/fs"
	"os"

	"github.com/remote-agents/remote-agents/localstack/seed"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// DefaultAppKey is the development app key unless RA_DEV_APP_KEY says otherwise.
const DefaultAppKey = seed.DefaultAppKey

// DefaultE2BKey is the development E2B API key unless RA_DEV_E2B_KEY says
// otherwise.
const DefaultE2BKey = seed.DefaultE2BKey

// DevTenant is the tenant of the development app key, and of the fixtures'
// projects and configurations.
const DevTenant = seed.DevTenant

// Seed loads the fixtures of dir ("" loads none) and registers appKey, as
// seed.Load does (the LocalStack init hook loads the same).
func Seed(ctx context.Context, reg registry.Store, dir, appKey string) error {
	var fixtures fs.FS
	if dir != "" {
		fixtures = os.DirFS(dir)
	}
	_, err := seed.Load(ctx, reg, fixtures, appKey)
	return err
}

// SeedE2BKey registers the development E2B API key (seed.RegisterE2BKey).
func SeedE2BKey(ctx context.Context, reg registry.Store, key string) error {
	return seed.RegisterE2BKey(ctx, reg, key)
}
