package devserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobs"
	"github.com/remote-agents/remote-agents/shared/session"
)

// downBus is a bus that takes nothing.
type downBus struct{}

func (downBus) Publish(context.Context, ...jobevents.Event) error {
	return errors.New("bus unavailable")
}

// noDispatch queues nothing (the test runs the job's steps itself).
type noDispatch struct{}

func (noDispatch) Publish(context.Context, jobs.Message, time.Duration) error { return nil }

// An event whose publish failed stays in the outbox, and the sweep publishes
// it once; a running job whose sandbox is gone is failed by the sweep (crash).
func TestJobOutboxAndSweep(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox())
	e := s.srv.Env
	store := dynamo.NewJobs(awsconfig.NewDynamoDB(e.AWS), e.Resources.Jobs.Name, e.Resources.Registry.Name)
	bus, err := e.JobEvents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	opts := job.Options{Store: store, Jobs: noDispatch{}, Sessions: e.SessionStore(), Bucket: e.Resources.Bucket.Name, AllowScripted: true}
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
	if err := working.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantTypes(t, s.jobEvents(t, j.ID, 3), jobevents.Created, jobevents.Started, jobevents.Failed)
	if p, err := store.Outbox(t.Context(), "", 10); err != nil || len(p) != 0 {
		t.Errorf("outbox after the sweep: %+v, %v", p, err)
	}
}
