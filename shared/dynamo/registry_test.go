package dynamo_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/registry/registrytest"
	"github.com/remote-agents/remote-agents/shared/toolgate"
)

// TestRegistry runs the registry.Store contract against DynamoDB Local, one fresh
// environment of tables per subtest.
func TestRegistry(t *testing.T) {
	t.Parallel()
	registrytest.Run(t, func(t *testing.T) registry.Store {
		set, api := setup(t)
		return dynamo.NewRegistry(api, set.Registry.Name)
	})
}

// An automation run is its session's: the same run id in another session,
// of the tenant or another, is another run, which neither reads nor
// completes nor pre-empts this one.
func TestRunsAreScopedBySession(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	runs := dynamo.NewRuns(api, set.Jobs.Name)
	doneBy := func(tenant, sessionID, completion, outcome string) toolgate.RunCompletion {
		return toolgate.RunCompletion{Tenant: tenant, RunID: "run-1", CompletionID: completion, Outcome: outcome, SessionID: sessionID, CompletedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	done := func(tenant, completion, outcome string) toolgate.RunCompletion {
		return doneBy(tenant, "s", completion, outcome)
	}
	first := done("tenant-a", "a-1", "succeeded")
	if got, err := runs.Complete(t.Context(), first); err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("first completion: %+v, %v", got, err)
	}
	theirs := done("tenant-b", "b-1", "failed")
	if got, err := runs.Complete(t.Context(), theirs); err != nil || !reflect.DeepEqual(got, theirs) {
		t.Errorf("another tenant's completion of the same run id = %+v, %v; want its own, %+v", got, err, theirs)
	}
	if got, err := runs.Complete(t.Context(), done("tenant-a", "a-2", "failed")); err != nil || !reflect.DeepEqual(got, first) {
		t.Errorf("a second completion = %+v, %v; want the first, %+v", got, err, first)
	}
	sibling := doneBy("tenant-a", "s2", "s2-1", "failed")
	if got, err := runs.Complete(t.Context(), sibling); err != nil || !reflect.DeepEqual(got, sibling) {
		t.Errorf("another session of the tenant completing the same run id = %+v, %v; want its own, %+v", got, err, sibling)
	}
	if got, err := runs.Complete(t.Context(), done("tenant-a", "a-1", "succeeded")); err != nil || !reflect.DeepEqual(got, first) {
		t.Errorf("the first session's retry = %+v, %v; want its completion, %+v", got, err, first)
	}
	if _, err := runs.Complete(t.Context(), doneBy("tenant-a", "", "x", "failed")); err == nil {
		t.Error("a run of no session was completed")
	}
	for _, tenant := range []string{"", "a#b"} {
		if _, err := runs.Complete(t.Context(), done(tenant, "x", "failed")); err == nil {
			t.Errorf("a run of tenant %q was completed", tenant)
		}
	}
}
