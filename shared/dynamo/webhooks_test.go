package dynamo_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/webhook"
	"github.com/remote-agents/remote-agents/shared/webhook/webhooktest"
)

// TestWebhooksContract runs the webhook store's contract on DynamoDB.
func TestWebhooksContract(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	webhooktest.Run(t, func(*testing.T) webhook.Store { return dynamo.NewWebhooks(api, set.Registry.Name) })
}
