package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Env values a user chose to persist (agent-contract.md 6.6) are kept for the
// session's configuration: one document per configuration, encrypted at rest
// (blob.Sealed), and written into the env file of each later session of the
// configuration through its spec. They never enter events, logs or the
// registry; events name their keys only.

// Limits of a configuration's persisted env values: MaxConfigurationEnvKeys
// keys, MaxConfigurationEnvBytes as JSON (what the spec carries).
const (
	MaxConfigurationEnvKeys  = 200
	MaxConfigurationEnvBytes = sandboxwire.MaxEnvBytes
)

// persistAttempts bounds the read-merge-write rounds one persist makes when
// other writers keep changing the document under it.
const persistAttempts = 5

// ConfigurationEnvKey is the object holding the env values tenant persisted
// for configuration id. Configuration ids are unique within a tenant only, and
// a platform configuration's values are each tenant's own: the key names both.
func ConfigurationEnvKey(tenant, id string) string {
	return "configurations/" + registry.Owner(tenant) + "/" + id + "/env.json"
}

// ConfigurationEnv returns the values tenant persisted for configuration id
// (none: an empty map) and the document's version ("" if there is none).
func ConfigurationEnv(ctx context.Context, sealed blob.Sealed, tenant, id string) (map[string]string, string, error) {
	values := map[string]string{}
	raw, version, err := sealed.ReadSealed(ctx, ConfigurationEnvKey(tenant, id), MaxConfigurationEnvBytes)
	if errors.Is(err, blob.ErrNotFound) {
		return values, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the env of configuration %s: %w", id, err)
	}
	if err := json.Unmarshal(raw, &values); err != nil {
		// Never the error's text: it may quote a value.
		return nil, "", fmt.Errorf("the env of configuration %s is damaged", id)
	}
	if values == nil {
		values = map[string]string{}
	}
	return values, version, nil
}

// persistEnv merges values into those tenant persisted for configuration id: keys
// it names are replaced, others kept. Concurrent persists lose nothing: a
// write from a stale read is retried from a fresh one.
func persistEnv(ctx context.Context, sealed blob.Sealed, tenant, id string, values map[string]string) error {
	if sealed == nil {
		return errors.New("persisting env values needs a sealed store")
	}
	for range persistAttempts {
		cur, version, err := ConfigurationEnv(ctx, sealed, tenant, id)
		if err != nil {
			return err
		}
		maps.Copy(cur, values)
		if len(cur) > MaxConfigurationEnvKeys {
			return apierror.New(apierror.InvalidRequest, "A configuration keeps at most %d env values.", MaxConfigurationEnvKeys)
		}
		raw, err := json.Marshal(cur)
		if err != nil {
			return fmt.Errorf("encode the env of configuration %s: %w", id, err)
		}
		if len(raw) > MaxConfigurationEnvBytes {
			return apierror.New(apierror.InvalidRequest, "A configuration keeps at most %d bytes of env values.", MaxConfigurationEnvBytes)
		}
		err = sealed.WriteSealed(ctx, ConfigurationEnvKey(tenant, id), raw, version)
		if !errors.Is(err, blob.ErrChanged) {
			return err
		}
	}
	return fmt.Errorf("persist the env of configuration %s: changed %d times under the merge", id, persistAttempts)
}
