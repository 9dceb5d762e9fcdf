package registry_test

import (
	"encoding/json"
	"strings"
	"testing"

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
