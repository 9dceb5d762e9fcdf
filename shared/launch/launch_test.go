package launch_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// TestEnvVouchesForIsolationOnlyWhenNothingIsAllowed: a sandbox is told it
// reaches nothing but the platform (sandboxwire.EnvNetworkIsolated) only
// when it is launched cut off and its policy allows nothing; cut off with an
// allowlist, or open, it is not.
func TestEnvVouchesForIsolationOnlyWhenNothingIsAllowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		isolated, offline bool
		want              string
	}{{true, true, "1"}, {true, false, ""}, {false, true, ""}, {false, false, ""}} {
		spec := launch.Spec{SessionID: "s", Generation: 1, Isolated: tc.isolated, Offline: tc.offline}
		if got := spec.Env()[sandboxwire.EnvNetworkIsolated]; got != tc.want {
			t.Errorf("isolated %v, offline %v: %s=%q, want %q", tc.isolated, tc.offline, sandboxwire.EnvNetworkIsolated, got, tc.want)
		}
	}
}
