// Package appkey authenticates the app keys apps call the platform's API
// with (Authorization: Bearer <app key>), over the registry's keys.
package appkey

import (
	"context"
	"errors"
	"fmt"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/token"
)

// MaxLen bounds an app key's length; a longer bearer is no key.
const MaxLen = 256

// Keys finds app keys by the hash of their secret (registry.Store).
type Keys interface {
	// AppKeyByHash returns the app key whose secret hashes to hash;
	// registry.ErrNotFound if none.
	AppKeyByHash(ctx context.Context, hash string) (registry.AppKey, error)
}

// Authenticator tells the app key a bearer secret belongs to.
type Authenticator struct {
	keys Keys
}

// New returns an authenticator over keys.
func New(keys Keys) *Authenticator { return &Authenticator{keys: keys} }

// Authenticate returns the app key secret belongs to: missing_token for
// none, invalid_token for a secret of no key, of a disabled key, or of a
// key of no tenant (or the platform's).
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (registry.AppKey, error) {
	if secret == "" {
		return registry.AppKey{}, apierror.New(apierror.MissingToken, "An app key is required: Authorization: Bearer <app key>.")
	}
	if len(secret) > MaxLen {
		return registry.AppKey{}, apierror.New(apierror.InvalidToken, "The app key is not valid.")
	}
	key, err := a.keys.AppKeyByHash(ctx, token.Hash(secret))
	// A key of no tenant could use nobody's items: it is no key (fail closed).
	if errors.Is(err, registry.ErrNotFound) || (err == nil && (key.Disabled || key.Tenant == "" || key.Tenant == registry.Platform)) {
		return registry.AppKey{}, apierror.New(apierror.InvalidToken, "The app key is not valid.")
	}
	if err != nil {
		return registry.AppKey{}, fmt.Errorf("authenticate app key: %w", err)
	}
	return key, nil
}
