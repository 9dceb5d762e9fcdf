package access

import (
	"slices"
	"testing"

	"github.com/remote-agents/remote-agents/shared/routes"
)

func TestEveryFunctionHasDeclaredAccess(t *testing.T) {
	fns := routes.Functions()
	slices.Sort(fns)
	if got := Functions(); !slices.Equal(got, fns) {
		t.Errorf("access declared for %v, functions %v", got, fns)
	}
}

func TestMatching(t *testing.T) {
	a, _ := For("sandbox")
	cases := []struct {
		key, action string
		want        bool
	}{
		{"sessions/abc/env/x.json", GetObject, true},
		{"sessions/abc/env/x.json", PutObject, false},
		{"sessions/abc/tools/verify/h/a/b.png", PutObject, true},
		{"snapshots/x", PutObject, false},
		{GuardrailsKey, GetObject, true},
		{"platform/other.md", GetObject, false},
		// Persisted env values: the sandbox channel reads them into specs only.
		{"configurations/cfg-1/env.json", GetObject, true},
		{"configurations/cfg-1/env.json", PutObject, false},
		{"configurations/cfg-1/other.json", GetObject, false},
	}
	for _, c := range cases {
		if got := a.AllowsObject(c.key, c.action); got != c.want {
			t.Errorf("%s %s: %v", c.action, c.key, got)
		}
	}
	w, _ := For("jobworker")
	if !w.AllowsList("sessions/x/tools/") || w.AllowsList("snapshots/") || !w.AllowsTable(Registry, UpdateItem) || w.AllowsSend(JobsQueue) {
		t.Error("jobworker access")
	}
}
