package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
)

// downBus is a bus that takes nothing.
type downBus struct{}

func (downBus) Publish(context.Context, ...jobevents.Event) error {
	return errors.New("bus unavailable")
}

// noDispatch queues nothing (the test runs the job's steps itself).
type noDispatch struct{}

func (noDispatch) Publish(context.Context, jobqueue.Message, time.Duration) error { return nil }

// An event whose publish failed stays in the outbox, and the sweep publishes
// it once; a running job whose sandbox is gone is failed by the sweep (crash).
func TestJobOutboxAndSweep(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	e := s.srv.Env
	store := dynamo.NewJobs(awsconfig.NewDynamoDB(e.AWS), e.Resources.Jobs.Name, e.Resources.Registry.Name)
	bus, err := jobservice.Events(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	opts := job.Options{Store: store, Jobs: noDispatch{}, Sessions: e.SessionStore(), Bucket: e.Resources.Bucket.Name, AllowScripted: true,
		Retention: 48 * time.Hour}
	down := opts
	down.Publisher = downBus{}
	up := opts
	up.Publisher = bus
	broken, working := job.New(down), job.New(up)

	agent := uuid.NewString()
	temp := 0.5
	if _, err := broken.PutProfile(t.Context(), agent, job.ProfileInput{Name: "w", Level: "L0", Provider: "scripted", Model: "m", MaxTokens: 10, Temperature: &temp, AllowedSkills: []string{}}); err != nil {
		t.Fatal(err)
	}
	h := job.Headers{IdentityID: uuid.NewString(), ContextID: uuid.NewString(), CommandID: uuid.NewString(), PlanStepID: uuid.NewString()}
	raw, _ := json.Marshal(map[string]any{"commandId": h.CommandID, "planStepId": h.PlanStepID, "agentId": agent, "identityId": h.IdentityID,
		"contextId": h.ContextID, "tokenLimit": 10, "inputData": map[string]any{}})
	req, msg := job.ParseCreate(raw)
	if msg != "" {
		t.Fatal(msg)
	}
	j, _, err := broken.Create(t.Context(), h, req)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := store.Outbox(t.Context(), j.ID, 10); err != nil || len(p) != 1 {
		t.Fatalf("outbox after a failed publish: %+v, %v", p, err)
	}
	// The sandbox starts and reports, then its session fails unreported.
	sid, run, err := broken.Prepare(t.Context(), j.ID)
	if err != nil || !run {
		t.Fatalf("prepare: %v %v", run, err)
	}
	if err := broken.Started(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SessionStore().Transition(t.Context(), sid, session.Change{From: session.Live, To: session.Failed, Reason: session.ReasonLost}); err != nil {
		t.Fatal(err)
	}
	if err := working.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(t.Context(), j.ID)
	if err != nil || got.Status != job.Failed || got.Failure == nil || got.Failure.Category != "crash" {
		t.Fatalf("swept job: %+v, %v", got, err)
	}
	// The finished job expires its retention after it finished.
	var item struct {
		ExpiresAt int64 `json:"expires_at"`
	}
	if err := dynamo.NewTable(awsconfig.NewDynamoDB(e.AWS), e.Resources.Jobs.Name).Get(t.Context(), map[string]string{"job_id": "job#" + j.ID, "sk": "job"}, &item); err != nil ||
		item.ExpiresAt != got.FinishedAt.Add(48*time.Hour).Unix() {
		t.Errorf("the failed job expires at %d (%v), want %d", item.ExpiresAt, err, got.FinishedAt.Add(48*time.Hour).Unix())
	}
	if err := working.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs := s.jobEvents(t, j.ID, 3)
	wantTypes(t, evs, jobevents.Created, jobevents.Started, jobevents.Failed)
	// AGENT.JOB.FAILED says why: the failure's category and message.
	var failed jobevents.Detail
	if err := json.Unmarshal(evs[2].Detail, &failed); err != nil || failed.Metadata == nil || failed.Metadata.Failure == nil ||
		failed.Metadata.Failure.Category != "crash" || failed.Metadata.Failure.Message != got.Failure.Message {
		t.Errorf("AGENT.JOB.FAILED detail %s: no failure, or another than the job's %+v", evs[2].Detail, got.Failure)
	}
	if p, err := store.Outbox(t.Context(), "", 10); err != nil || len(p) != 0 {
		t.Errorf("outbox after the sweep: %+v, %v", p, err)
	}
}

// A running job past its timeout whose sandbox did not end it is failed by
// the sweep, category timeout, once the grace has passed too, and its
// sandbox's session is told to stop (ending, reason timeout); before that,
// the sweep leaves it running.
func TestJobSweepTimesOutAnOverdueJob(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	e := s.srv.Env
	store := dynamo.NewJobs(awsconfig.NewDynamoDB(e.AWS), e.Resources.Jobs.Name, e.Resources.Registry.Name)
	bus, err := jobservice.Events(t.Context(), e)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	clock := func() time.Time { return now }
	svc := job.New(job.Options{Store: store, Jobs: noDispatch{}, Sessions: e.SessionStore(), Bucket: e.Resources.Bucket.Name, AllowScripted: true, Publisher: bus, Now: clock})
	agent := uuid.NewString()
	temp := 0.5
	if _, err := svc.PutProfile(t.Context(), agent, job.ProfileInput{Name: "w", Level: "L0", Provider: "scripted", Model: "m", MaxTokens: 10, Temperature: &temp, AllowedSkills: []string{}}); err != nil {
		t.Fatal(err)
	}
	h := job.Headers{IdentityID: uuid.NewString(), ContextID: uuid.NewString(), CommandID: uuid.NewString(), PlanStepID: uuid.NewString()}
	raw, _ := json.Marshal(map[string]any{"commandId": h.CommandID, "planStepId": h.PlanStepID, "agentId": agent, "identityId": h.IdentityID,
		"contextId": h.ContextID, "tokenLimit": 10, "inputData": map[string]any{}, "constraints": map[string]any{"timeout": 30}})
	req, msg := job.ParseCreate(raw)
	if msg != "" {
		t.Fatal(msg)
	}
	j, _, err := svc.Create(t.Context(), h, req)
	if err != nil {
		t.Fatal(err)
	}
	sid, run, err := svc.Prepare(t.Context(), j.ID)
	if err != nil || !run {
		t.Fatalf("prepare: %v %v", run, err)
	}
	if err := svc.Started(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	// Its sandbox is up, and heart-beats: not gone.
	if _, err := e.SessionStore().Transition(t.Context(), sid, session.Change{From: []session.State{session.Provisioning}, To: session.Ready}); err != nil {
		t.Fatal(err)
	}
	beat := func() {
		t.Helper()
		if _, err := e.SessionStore().Touch(t.Context(), sid, 1, session.Fields{HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(30*time.Second + job.TimeoutGrace - time.Second)
	beat()
	if err := svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get(t.Context(), j.ID); err != nil || got.Status != job.Running {
		t.Fatalf("within the grace: %+v, %v", got, err)
	}
	now = now.Add(2 * time.Second)
	beat()
	if err := svc.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(t.Context(), j.ID)
	if err != nil || got.Status != job.Failed || got.Failure == nil || got.Failure.Category != "timeout" {
		t.Fatalf("overdue job after the sweep: %+v, %v", got, err)
	}
	sess, err := e.SessionStore().Get(t.Context(), sid)
	if err != nil || sess.State != session.Ending || sess.Reason != session.ReasonTimeout {
		t.Errorf("its session: %s %s (%v)", sess.State, sess.Reason, err)
	}
	wantTypes(t, s.jobEvents(t, j.ID, 3), jobevents.Created, jobevents.Started, jobevents.Failed)
}

// A running job's view shows its sandbox's last measure of CPU and memory,
// with an alert past 80 % of its memory constraint, and an alert while the
// model provider limits its calls.
func TestJobViewShowsResourcesAndAlerts(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	e := s.srv.Env
	store := dynamo.NewJobs(awsconfig.NewDynamoDB(e.AWS), e.Resources.Jobs.Name, e.Resources.Registry.Name)
	svc := job.New(job.Options{Store: store, Jobs: noDispatch{}, Sessions: e.SessionStore(), Bucket: e.Resources.Bucket.Name, AllowScripted: true, Publisher: downBus{}})
	agent := uuid.NewString()
	temp := 0.5
	if _, err := svc.PutProfile(t.Context(), agent, job.ProfileInput{Name: "w", Level: "L0", Provider: "scripted", Model: "m", MaxTokens: 10, Temperature: &temp, AllowedSkills: []string{}}); err != nil {
		t.Fatal(err)
	}
	h := job.Headers{IdentityID: uuid.NewString(), ContextID: uuid.NewString(), CommandID: uuid.NewString(), PlanStepID: uuid.NewString()}
	raw, _ := json.Marshal(map[string]any{"commandId": h.CommandID, "planStepId": h.PlanStepID, "agentId": agent, "identityId": h.IdentityID,
		"contextId": h.ContextID, "tokenLimit": 10, "inputData": map[string]any{}, "constraints": map[string]any{"memory": 1024}})
	req, msg := job.ParseCreate(raw)
	if msg != "" {
		t.Fatal(msg)
	}
	j, _, err := svc.Create(t.Context(), h, req)
	if err != nil {
		t.Fatal(err)
	}
	sid, _, err := svc.Prepare(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Started(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := svc.Live(t.Context(), got); v.Resources.CPUUsage != nil || v.Resources.MemoryUsage != nil || len(v.Alerts) != 0 {
		t.Fatalf("before any measure: %+v %+v", v.Resources, v.Alerts)
	}
	if _, err := e.SessionStore().Touch(t.Context(), sid, 1, session.Fields{Resources: &sandboxwire.ResourceSample{CPUPercent: 55, MemoryMB: 900, Files: 3, LogBytes: 4096}, RateLimitedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	v := svc.Live(t.Context(), got)
	if v.Resources.CPUUsage == nil || *v.Resources.CPUUsage != 55 || v.Resources.MemoryUsage == nil || *v.Resources.MemoryUsage != 900 {
		t.Errorf("resources %+v", v.Resources)
	}
	// While it runs, what it made so far, as its sandbox last measured it.
	if v.Resources.FilesCreated != 3 || v.Resources.LogsSize != 4096 {
		t.Errorf("a running job's files %d and log size %d, want 3 and 4096", v.Resources.FilesCreated, v.Resources.LogsSize)
	}
	var types []string
	for _, a := range v.Alerts {
		types = append(types, a.Type)
	}
	if !slices.Equal(types, []string{"memory_usage", "rate_limit"}) {
		t.Errorf("alerts %v, want memory_usage and rate_limit", v.Alerts)
	}
	// The alerts are events too, once each (the heartbeats call Alert).
	sess, err := e.SessionStore().Get(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := svc.Alert(t.Context(), j.ID, sess); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := store.Outbox(t.Context(), j.ID, 20)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, p := range pending {
		if p.Event.Type == jobevents.Alert && p.Event.Detail.Alert != nil && p.Event.Detail.Status == "running" {
			alerts = append(alerts, p.Event.Detail.Alert.Type)
		}
	}
	if !slices.Equal(alerts, []string{"memory_usage", "rate_limit"}) {
		t.Errorf("AGENT.JOB.ALERT events for %v, want memory_usage and rate_limit once each (outbox %+v)", alerts, pending)
	}
}

// A failed job's plan step is re-run on the orchestrator's explicit call: a
// new job, the step's next attempt, which the step's claim names (a create
// replayed for the step answers it); the old job keeps its failure. The
// retry sent again answers the same attempt; a job that has not failed, or
// another plan step's headers, are refused.
func TestFailedJobIsRetriedOnCall(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	e := s.srv.Env
	store := dynamo.NewJobs(awsconfig.NewDynamoDB(e.AWS), e.Resources.Jobs.Name, e.Resources.Registry.Name)
	svc := job.New(job.Options{Store: store, Jobs: noDispatch{}, Sessions: e.SessionStore(), Bucket: e.Resources.Bucket.Name, AllowScripted: true, Publisher: downBus{}})
	agent := uuid.NewString()
	temp := 0.5
	if _, err := svc.PutProfile(t.Context(), agent, job.ProfileInput{Name: "w", Level: "L0", Provider: "scripted", Model: "m", MaxTokens: 10, Temperature: &temp, AllowedSkills: []string{}}); err != nil {
		t.Fatal(err)
	}
	h := job.Headers{IdentityID: uuid.NewString(), ContextID: uuid.NewString(), CommandID: uuid.NewString(), PlanStepID: uuid.NewString()}
	raw, _ := json.Marshal(map[string]any{"commandId": h.CommandID, "planStepId": h.PlanStepID, "agentId": agent, "identityId": h.IdentityID,
		"contextId": h.ContextID, "tokenLimit": 10, "inputData": map[string]any{"topic": "otters"}})
	req, msg := job.ParseCreate(raw)
	if msg != "" {
		t.Fatal(msg)
	}
	first, _, err := svc.Create(t.Context(), h, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Retry(t.Context(), h, first.ID); apierror.CodeOf(err) != apierror.PlanStepConflict {
		t.Errorf("retry of a job that has not failed: %v, want plan_step_conflict", err)
	}
	if err := svc.Crashed(t.Context(), first.ID, "The sandbox went away."); err != nil {
		t.Fatal(err)
	}
	other := h
	other.PlanStepID = uuid.NewString()
	if _, _, err := svc.Retry(t.Context(), other, first.ID); apierror.CodeOf(err) != apierror.InvalidRequest {
		t.Errorf("retry with another plan step's headers: %v, want invalid_request", err)
	}
	retryCmd := h
	retryCmd.CommandID = uuid.NewString()
	next, replayed, err := svc.Retry(t.Context(), retryCmd, first.ID)
	if err != nil || replayed || next.ID == first.ID || next.Attempt != 2 || next.RetryOf != first.ID || next.Status != job.Created ||
		next.InputData != first.InputData || next.CommandID != retryCmd.CommandID {
		t.Fatalf("retry: %+v replayed=%v %v", next, replayed, err)
	}
	if again, replayed, err := svc.Retry(t.Context(), retryCmd, first.ID); err != nil || !replayed || again.ID != next.ID {
		t.Errorf("the retry sent again: %+v replayed=%v %v, want %s replayed", again, replayed, err, next.ID)
	}
	if got, replayed, err := svc.Create(t.Context(), h, req); err != nil || !replayed || got.ID != next.ID {
		t.Errorf("a create replayed for the step answers %s (%v, %v), want the new attempt %s", got.ID, replayed, err, next.ID)
	}
	if old, err := store.Get(t.Context(), first.ID); err != nil || old.Status != job.Failed || old.Failure == nil {
		t.Errorf("the old job after the retry: %+v %v", old, err)
	}
	if v := job.ViewOf(next, time.Now()); v.Attempt != 2 || v.RetryOf == nil || *v.RetryOf != first.ID {
		t.Errorf("the new attempt's view: attempt %d retry_of %v", v.Attempt, v.RetryOf)
	}
}
