package storetest_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) session.Store { return storetest.NewMemory() })
}
