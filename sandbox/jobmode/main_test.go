package jobmode

import (
	"os"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/confine"
)

// TestMain lets the test binary serve as the confining helper of the job
// commands its tests run (as the agent's main does).
func TestMain(m *testing.M) {
	confine.Main()
	os.Exit(m.Run())
}
