// Package secretstore builds the secrets service of an Env, once: over the
// Env's SecretStore (the dev server's memory) or else Secrets Manager, its
// secrets named ra/<env>/secrets/<tenant>/<name>. The agenttypes function
// (the secrets routes) and the egress proxy use it.
package secretstore

import (
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/shared/secrets"
	"github.com/remote-agents/remote-agents/shared/smstore"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

type key int

// Service is the Env's secrets service.
func Service(e *wiring.Env) *secrets.Service {
	s, _ := wiring.Once(e, key(0), func() (*secrets.Service, error) {
		store := e.SecretStore
		if store == nil {
			store = smstore.NewStore(secretsmanager.NewFromConfig(e.AWS), e.Resources.SecretsPrefix())
		}
		return secrets.New(store, nil), nil
	})
	return s
}
