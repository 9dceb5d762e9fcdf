// Package smsecrets is the Secrets Manager adapter: the model providers' API
// keys (modelgateway.Keys), each a secret whose value is the key itself, read
// the first time it is needed and kept for the life of the process (a Lambda
// function's cold start). A secret that is empty or missing is read again at
// most once a minute, so that a key put in after a deployment is picked up
// without hammering Secrets Manager meanwhile.
package smsecrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
)

// API is the part of the Secrets Manager client the adapter calls.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var (
	_ API               = (*secretsmanager.Client)(nil)
	_ modelgateway.Keys = (*Keys)(nil)
)

// RetryEmpty is how long an empty or missing secret is taken as such before
// it is read again.
const RetryEmpty = time.Minute

// Keys are the providers' keys, by provider the secret holding each.
type Keys struct {
	api API
	ids map[string]string
	now func() time.Time

	mu    sync.Mutex
	found map[string]string
	// missed records when a secret was last found empty or missing.
	missed map[string]time.Time
}

// New returns the keys of the secrets ids names (by provider).
func New(api API, ids map[string]string) *Keys {
	return &Keys{api: api, ids: ids, now: time.Now, found: map[string]string{}, missed: map[string]time.Time{}}
}

// WithClock sets the clock that times RetryEmpty (tests).
func (k *Keys) WithClock(now func() time.Time) *Keys {
	k.now = now
	return k
}

// Key returns provider's key: modelgateway.ErrNoKey when no secret is named
// for it or the secret is empty or missing; an outage of Secrets Manager is
// apierror's service_unavailable.
func (k *Keys) Key(ctx context.Context, provider string) (string, error) {
	id := k.ids[provider]
	if id == "" {
		return "", fmt.Errorf("%s: %w", provider, modelgateway.ErrNoKey)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if key, ok := k.found[provider]; ok {
		return key, nil
	}
	if at, ok := k.missed[provider]; ok && k.now().Sub(at) < RetryEmpty {
		return "", fmt.Errorf("%s: secret empty or missing: %w", provider, modelgateway.ErrNoKey)
	}
	out, err := k.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &id})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		k.missed[provider] = k.now()
		return "", fmt.Errorf("%s: secret not found: %w", provider, modelgateway.ErrNoKey)
	case err != nil:
		return "", awserr.Classify(fmt.Errorf("read the %s key's secret: %w", provider, err))
	}
	key := ""
	if out.SecretString != nil {
		key = strings.TrimSpace(*out.SecretString)
	}
	if key == "" {
		k.missed[provider] = k.now()
		return "", fmt.Errorf("%s: secret empty: %w", provider, modelgateway.ErrNoKey)
	}
	k.found[provider] = key
	delete(k.missed, provider)
	return key, nil
}
