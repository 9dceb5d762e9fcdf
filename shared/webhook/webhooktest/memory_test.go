package webhooktest_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/webhook"
	"github.com/remote-agents/remote-agents/shared/webhook/webhooktest"
)

func TestMemory(t *testing.T) {
	webhooktest.Run(t, func(*testing.T) webhook.Store { return webhooktest.NewMemory() })
}
