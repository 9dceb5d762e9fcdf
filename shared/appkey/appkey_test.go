package appkey_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/appkey"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/token"
)

// keys holds app keys by the hash of their secret.
type keys map[string]registry.AppKey

func (k keys) AppKeyByHash(_ context.Context, hash string) (registry.AppKey, error) {
	key, ok := k[hash]
	if !ok {
		return registry.AppKey{}, registry.ErrNotFound
	}
	return key, nil
}

func TestAuthenticate(t *testing.T) {
	good, goodHash := token.New(token.AppKey)
	off, offHash := token.New(token.AppKey)
	none, noneHash := token.New(token.AppKey)
	platform, platformHash := token.New(token.AppKey)
	unknown, _ := token.New(token.AppKey)
	auth := appkey.New(keys{
		goodHash:     {ID: "k1", Tenant: "acme"},
		offHash:      {ID: "k2", Tenant: "acme", Disabled: true},
		noneHash:     {ID: "k3"},
		platformHash: {ID: "k4", Tenant: registry.Platform},
	})
	for _, tc := range []struct {
		name   string
		secret string
		code   apierror.Code
	}{
		{"missing", "", apierror.MissingToken},
		{"too long", strings.Repeat("r", appkey.MaxLen+1), apierror.InvalidToken},
		{"unknown", unknown, apierror.InvalidToken},
		{"disabled", off, apierror.InvalidToken},
		{"no tenant", none, apierror.InvalidToken},
		{"platform's", platform, apierror.InvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.Authenticate(t.Context(), tc.secret)
			var e *apierror.Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("Authenticate: %v, want %s", err, tc.code)
			}
		})
	}
	key, err := auth.Authenticate(t.Context(), good)
	if err != nil || key.ID != "k1" || key.Tenant != "acme" {
		t.Fatalf("Authenticate(good) = %+v, %v", key, err)
	}
}

// down is a registry that cannot be read.
type down struct{}

func (down) AppKeyByHash(context.Context, string) (registry.AppKey, error) {
	return registry.AppKey{}, errors.New("registry down")
}

// An outage is no verdict on the key: it is an error, not invalid_token.
func TestAuthenticateOutage(t *testing.T) {
	secret, _ := token.New(token.AppKey)
	_, err := appkey.New(down{}).Authenticate(t.Context(), secret)
	var e *apierror.Error
	if err == nil || errors.As(err, &e) {
		t.Fatalf("Authenticate over a registry down: %v, want an internal error", err)
	}
}
