package dynamo_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	domain "github.com/remote-agents/remote-agents/shared/session" // dynamo_test has a type session
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

// TestSessions runs the session.Store contract against DynamoDB Local, one fresh
// environment of tables per subtest.
func TestSessions(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) domain.Store {
		set, api := setup(t)
		return dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	})
}
