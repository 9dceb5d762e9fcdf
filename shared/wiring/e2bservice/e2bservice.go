// Package e2bservice builds what the sandbox API and the sandbox proxy
// share: the key of sandboxes' envd access tokens.
package e2bservice

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/shared/envdtoken"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

type tokensKey struct{}

// Tokens is the key envd access tokens are minted and checked with: the
// secret RA_E2B_TOKEN_SECRET names, read once; without one, a random key,
// the same for everything built in e (the dev server's sandbox API and
// proxy).
func Tokens(ctx context.Context, e *wiring.Env) (envdtoken.Key, error) {
	return wiring.Once(e, tokensKey{}, func() (envdtoken.Key, error) {
		id := e.Config.E2B.TokenSecret
		if id == "" {
			return envdtoken.Random(), nil
		}
		out, err := secretsmanager.NewFromConfig(e.AWS).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil {
			return envdtoken.Key{}, fmt.Errorf("the envd token secret: %w", err)
		}
		return envdtoken.New([]byte(aws.ToString(out.SecretString)))
	})
}
