package dynamo_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/registry/registrytest"
)

// TestRegistry runs the registry.Store contract against DynamoDB Local, one fresh
// environment of tables per subtest.
func TestRegistry(t *testing.T) {
	t.Parallel()
	registrytest.Run(t, func(t *testing.T) registry.Store {
		set, api := setup(t)
		return dynamo.NewRegistry(api, set.Registry.Name)
	})
}
