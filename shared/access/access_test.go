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
		{"configurations/acme/cfg-1/env.json", GetObject, true},
		{"configurations/acme/cfg-1/env.json", PutObject, false},
		{"configurations/acme/cfg-1/other.json", GetObject, false},
	}
	for _, c := range cases {
		if got := a.AllowsObject(c.key, c.action); got != c.want {
			t.Errorf("%s %s: %v", c.action, c.key, got)
		}
	}
	w, _ := For("jobworker")
	if !w.AllowsList("sessions/x/tools/") || w.AllowsList("snapshots/") || !w.AllowsTable(Registry, UpdateItem) || !w.AllowsSend(JobsQueue) || w.AllowsSend(WebhooksQueue) {
		t.Error("jobworker access")
	}
}

// The gateway tools' functions write, of the registry and the jobs table, only
// configurations and run records: never an app key, project or persona.
func TestToolWritesAreLimitedByItem(t *testing.T) {
	type itemCase struct {
		table, action, key string
		want               bool
	}
	cases := []itemCase{
		{Registry, UpdateItem, "configuration#dev#demo-web", true},
		{Registry, UpdateItem, "app_key#0123abcd", false},
		{Registry, UpdateItem, "project#dev#demo", false},
		{Registry, UpdateItem, "persona#platform#assistant", false},
		{Registry, UpdateItem, "", false},
		{Registry, PutItem, "configuration#dev#demo-web", false},
		{Registry, GetItem, "configuration#dev#demo-web", false},
		{Jobs, PutItem, "run#dev#run-1", true},
		{Jobs, PutItem, "job-1", false},
		// Tables not limited by item.
		{Sessions, UpdateItem, "a-session", true},
		{Sessions, UpdateItem, "", true},
	}
	// jobworker also keeps the warm pool (its items, and a lease per type,
	// written and read whole) and lists the pooled agent types: its grants on
	// those prefixes cover every item action, configurations' included.
	worker := append(slices.Clone(cases),
		itemCase{Registry, PutItem, "pool#pool-1", true},
		itemCase{Registry, DeleteItem, "poollock#t#warm", true},
		itemCase{Registry, DeleteItem, "app_key#0123abcd", false},
		itemCase{Registry, GetItem, "app_key#0123abcd", false},
		itemCase{Registry, Query, "app_key", true})
	for i, c := range worker {
		if c.table == Registry && c.key == "configuration#dev#demo-web" && c.action != UpdateItem {
			worker[i].want = true
		}
	}
	for fn, cases := range map[string][]itemCase{"toolcallback": cases, "jobworker": worker} {
		a, _ := For(fn)
		for _, c := range cases {
			if got := a.AllowsItem(c.table, c.action, c.key); got != c.want {
				t.Errorf("%s: %s on %s item %q: %v, want %v", fn, c.action, c.table, c.key, got, c.want)
			}
		}
	}
	// The sandbox function reads the registry, and writes only pool items.
	sb, _ := For("sandbox")
	if !sb.AllowsItem(Registry, GetItem, "persona#platform#assistant") || !sb.AllowsItem(Registry, UpdateItem, "pool#pool-1") ||
		sb.AllowsItem(Registry, UpdateItem, "app_key#0123abcd") || sb.AllowsItem(Registry, UpdateItem, "") {
		t.Error("sandbox: the registry's reads everywhere, its writes only on pool items")
	}
	// create reads every kind of registry item (app keys first).
	if c, _ := For("create"); !c.AllowsItem(Registry, GetItem, "app_key#0123abcd") || !c.AllowsItem(Registry, GetItem, "") {
		t.Error("create cannot read app keys")
	}
}

func TestOnlyPublishersPutJobEvents(t *testing.T) {
	t.Parallel()
	for _, fn := range Functions() {
		a, _ := For(fn)
		// Job transitions happen in the jobs function (create, cancel), jobworker
		// (run, sweep) and the sandbox channel (started, ended).
		publishes := fn == "jobworker" || fn == "jobs" || fn == "sandbox"
		if a.AllowsPutEvents(JobEventsBus) != publishes || a.AllowsSend(OrchestratorQueue) != publishes {
			t.Errorf("%s: puts job events %v, sends to the orchestrator queue %v; want %v", fn, a.AllowsPutEvents(JobEventsBus), a.AllowsSend(OrchestratorQueue), publishes)
		}
		if a.AllowsPutEvents("default") || slices.Contains(a.Send, OrchestratorQueue) {
			t.Errorf("%s: may put events on the default bus, or send to the orchestrator queue on AWS", fn)
		}
	}
}
