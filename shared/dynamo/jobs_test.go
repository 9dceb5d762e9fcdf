package dynamo_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
)

// legacyItem is a running marker or an outbox event as written before the
// partitions were sharded.
type legacyItem struct {
	JobID   string `json:"job_id"`
	SK      string `json:"sk"`
	Job     string `json:"outbox_job_id,omitempty"`
	Seq     int    `json:"seq,omitempty"`
	EventID string `json:"event_id,omitempty"`
	Type    string `json:"detail_type,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// The sweep sees every running job and every pending event, more than a
// page of them, across the partitions they are spread over, and those
// written before the partitions were sharded too.
func TestRunningJobsAndOutboxAcrossPartitions(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	jobs := dynamo.NewJobs(api, set.Jobs.Name, set.Registry.Name)
	const n = 130 // over the one page of 100 the sweep read before
	now := time.Now().UTC()
	var want []string
	for i := range n {
		j := job.Job{ID: uuid.NewString(), CommandID: uuid.NewString(), PlanStepID: uuid.NewString(), AgentID: "a", IdentityID: "i", ContextID: "c",
			Status: job.Created, TokenLimit: 10, InputData: "{}", CreatedAt: now}
		ev := job.Pending{JobID: j.ID, Seq: 1, Event: jobevents.Event{ID: j.ID + ":created", Type: jobevents.Created, Time: now,
			Detail: jobevents.Detail{JobID: j.ID, Status: "CREATED"}}}
		if _, err := jobs.Create(t.Context(), j, []job.Pending{ev}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := jobs.Transition(t.Context(), j.ID, job.Change{From: job.Live, To: job.Running, StartedAt: now}, nil); err != nil {
				t.Fatal(err)
			}
			want = append(want, j.ID)
		}
	}
	table := dynamo.NewTable(api, set.Jobs.Name)
	for _, it := range []legacyItem{{JobID: "running", SK: "legacy-job"},
		{JobID: "outbox", SK: "legacy-job#01", Job: "legacy-job", Seq: 1, EventID: "legacy-job:created", Type: "AGENT.JOB.CREATED", Detail: `{"jobId":"legacy-job"}`}} {
		if err := table.Put(t.Context(), it); err != nil {
			t.Fatal(err)
		}
	}
	want = append(want, "legacy-job")

	running, err := jobs.Running(t.Context(), job.MaxSweptJobs)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(running)
	slices.Sort(want)
	if !slices.Equal(running, want) {
		t.Errorf("Running read %d jobs, want the %d running", len(running), len(want))
	}
	pending, err := jobs.Outbox(t.Context(), "", job.MaxSweptJobs)
	if err != nil || len(pending) != n+1 {
		t.Fatalf("Outbox read %d events (%v), want %d", len(pending), err, n+1)
	}
	if capped, err := jobs.Running(t.Context(), 7); err != nil || len(capped) != 7 {
		t.Errorf("Running with a limit of 7: %d (%v)", len(capped), err)
	}
	// Published removes an event wherever it is.
	for _, p := range pending {
		if p.JobID == "legacy-job" || p.JobID == pending[0].JobID {
			if err := jobs.Published(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if left, err := jobs.Outbox(t.Context(), "", job.MaxSweptJobs); err != nil || len(left) != n-1 {
		t.Errorf("after two were published the outbox holds %d (%v), want %d", len(left), err, n-1)
	}
	if left, err := jobs.Outbox(t.Context(), "", job.MaxSweptJobs); err != nil || slices.ContainsFunc(left, func(p job.Pending) bool { return p.JobID == "legacy-job" }) {
		t.Errorf("a published legacy event is still there: %v %v", left, err)
	}

}

// A finished job's item expires when its transition says (the table's TTL
// attribute); a job that goes on does not.
func TestFinishedJobExpires(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	jobs := dynamo.NewJobs(api, set.Jobs.Name, set.Registry.Name)
	now := time.Now().UTC()
	j := job.Job{ID: uuid.NewString(), CommandID: uuid.NewString(), PlanStepID: uuid.NewString(), AgentID: "a", IdentityID: "i", ContextID: "c",
		Status: job.Created, TokenLimit: 10, InputData: "{}", CreatedAt: now}
	if _, err := jobs.Create(t.Context(), j, nil); err != nil {
		t.Fatal(err)
	}
	expiry := func() (int64, bool) {
		t.Helper()
		var item struct {
			ExpiresAt *int64 `json:"expires_at"`
		}
		if err := dynamo.NewTable(api, set.Jobs.Name).Get(t.Context(), map[string]string{"job_id": "job#" + j.ID, "sk": "job"}, &item); err != nil {
			t.Fatal(err)
		}
		if item.ExpiresAt == nil {
			return 0, false
		}
		return *item.ExpiresAt, true
	}
	if _, err := jobs.Transition(t.Context(), j.ID, job.Change{From: job.Live, To: job.Running, StartedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	if at, ok := expiry(); ok {
		t.Errorf("a running job expires at %d", at)
	}
	want := now.Add(30 * 24 * time.Hour).Unix()
	if _, err := jobs.Transition(t.Context(), j.ID, job.Change{From: job.Live, To: job.Completed, FinishedAt: now, ExpiresAt: want}, nil); err != nil {
		t.Fatal(err)
	}
	if at, ok := expiry(); !ok || at != want {
		t.Errorf("a finished job expires at %d (%v), want %d", at, ok, want)
	}
}
