package registry_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// A workspace configuration shows every field: base_image is null when
// unset, the image when set, and reads back as written.
func TestWorkspaceConfigShowsBaseImageNullWhenUnset(t *testing.T) {
	for _, c := range []registry.WorkspaceConfig{{Enabled: true}, {Enabled: true, BaseImage: "public.ecr.aws/docker/library/node:22"}} {
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		want := `"base_image":null`
		if c.BaseImage != "" {
			want = `"base_image":"` + c.BaseImage + `"`
		}
		if strings.Count(string(raw), `"base_image"`) != 1 || !strings.Contains(string(raw), want) {
			t.Errorf("%s: want %s once", raw, want)
		}
		var back registry.WorkspaceConfig
		if err := json.Unmarshal(raw, &back); err != nil || back.BaseImage != c.BaseImage || !back.Enabled {
			t.Errorf("read back %+v %v", back, err)
		}
	}
}

// A cap in USD is 0 (none) to config.MaxUSD: past it, it would bound nothing, its
// millionths would overflow the spend counters and DynamoDB refuses the
// largest (1e126 and up).
func TestCapsInUSDAreBounded(t *testing.T) {
	for _, c := range []struct {
		usd float64
		ok  bool
	}{{0, true}, {0.01, true}, {config.MaxUSD, true}, {-1, false}, {config.MaxUSD + 1, false}, {1e126, false}, {math.Inf(1), false}, {math.NaN(), false}} {
		session := registry.SessionLimits{MaxCostUSD: c.usd}.Problem("session_limits.")
		app := registry.AppKeyLimits{MaxCostUSDPerDay: c.usd}.Problem()
		month := registry.AppKeyLimits{MaxCostUSDPerMonth: c.usd}.Problem()
		for _, problem := range []string{session, app, month} {
			if (problem == "") != c.ok {
				t.Errorf("%v USD: %q, want ok %v", c.usd, problem, c.ok)
			}
		}
	}
}
