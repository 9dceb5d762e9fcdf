package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/tasksize"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Prepare readies the run of job id (job.run): it gives a created job the
// session of its sandbox, once, and returns it; run is false when the job
// needs no sandbox (started, over, or gone). A redelivered job.run gets the
// same session, whose launch is claimed once (package jobworker).
func (s *Service) Prepare(ctx context.Context, id string) (sessionID string, run bool, err error) {
	j, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if j.Status != Created {
		return "", false, nil
	}
	if j.SessionID == "" {
		j, err = s.o.Store.AttachSession(ctx, j.ID, uuid.NewString())
		if err != nil && !errors.Is(err, ErrConflict) {
			return "", false, err
		}
		if j.Status != Created || j.SessionID == "" {
			return "", false, nil
		}
	}
	_, err = s.o.Sessions.Get(ctx, j.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		now := s.o.Now().UTC()
		sess := session.Session{
			ID: j.SessionID,
			Blueprint: session.Blueprint{
				JobID:           j.ID,
				JobTokenLimit:   j.TokenLimit,
				TmuxSessionName: "ra-job-" + j.ID[:8],
			},
			State:      session.Provisioning,
			Generation: 1,
			CreatedAt:  now,
			UpdatedAt:  now,
		}
		p, perr := s.o.Store.Profile(ctx, j.AgentID)
		if perr != nil && !errors.Is(perr, ErrNotFound) {
			return "", false, fmt.Errorf("profile of job %s: %w", j.ID, perr)
		}
		network := j.Constraints != nil && j.Constraints.Network != nil && *j.Constraints.Network
		if perr == nil && offline(p, network) {
			none := egress.None()
			sess.Egress = &none
		}
		if perr == nil && p.WarmPoolSize > 0 && (j.Constraints == nil || j.Constraints.Memory == nil) && offline(p, network) == offline(p, false) {
			// Its profile's pool has sandboxes of the default size, cut
			// off as the job is.
			ws := poolWorkspace(p)
			sess.AgentType, sess.Workspace = PoolType(p.ID), &ws
		}
		if err = s.o.Sessions.Create(ctx, sess, nil); err != nil {
			if _, gerr := s.o.Sessions.Get(ctx, sess.ID); gerr == nil {
				err = nil // a concurrent delivery made it
			}
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("session of job %s: %w", j.ID, err)
	}
	return j.SessionID, true, nil
}

// Spec is the JobSpec of job id, for its sandbox (sandboxchannel.JobRuns).
func (s *Service) Spec(ctx context.Context, id string) (sandboxwire.JobSpec, []string, error) {
	j, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return sandboxwire.JobSpec{}, nil, fmt.Errorf("job %s: %w", id, err)
	}
	p, err := s.o.Store.Profile(ctx, j.AgentID)
	if err != nil {
		return sandboxwire.JobSpec{}, nil, fmt.Errorf("profile %s of job %s: %w", j.AgentID, id, err)
	}
	spec := sandboxwire.JobSpec{
		JobID:      j.ID,
		InputData:  json.RawMessage(j.InputData),
		TokenLimit: j.TokenLimit,
		Profile: sandboxwire.JobProfile{AgentID: p.ID, Name: p.Name, Level: p.Level, Provider: p.Provider, Model: p.Model,
			MaxTokens: p.MaxTokens, Temperature: p.Temperature, AllowedSkills: slices.Clone(p.AllowedSkills), Agentfiles: p.Agentfiles},
	}
	if c := j.Constraints; c != nil {
		if c.Timeout != nil {
			spec.TimeoutSeconds = *c.Timeout
		}
		if c.Memory != nil {
			spec.MemoryMB = *c.Memory
		}
		spec.Network = c.Network != nil && *c.Network
	}
	// The tools the sandbox registers: the profile's tool skills, nothing else.
	tools := []string{}
	for _, sk := range p.AllowedSkills {
		if toolspec.IsWorkspaceTool(sk) {
			tools = append(tools, sk)
		}
	}
	return spec, tools, nil
}

// Size is the size of job id's sandbox: the smallest Fargate size with the
// memory its constraints ask for (the process launcher's memory limit
// locally); zero, the launcher's default, without one.
func (s *Service) Size(ctx context.Context, id string) (tasksize.Size, error) {
	j, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return tasksize.Size{}, fmt.Errorf("job %s: %w", id, err)
	}
	if j.Constraints == nil || j.Constraints.Memory == nil {
		return tasksize.Size{}, nil
	}
	return tasksize.ForMemory(*j.Constraints.Memory), nil
}

// Started marks job id running (STARTED) when its sandbox first reports; a
// job already past created is left as it is.
func (s *Service) Started(ctx context.Context, id string) error {
	j, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	if j.Status != Created {
		return nil
	}
	now := s.o.Now().UTC()
	j.StartedAt = now
	_, err = s.o.Store.Transition(ctx, id, Change{From: []Status{Created}, To: Running, StartedAt: now}, []Pending{s.event(j, jobevents.Started, now)})
	if errors.Is(err, ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	s.Flush(ctx, id)
	return nil
}

// Finished records how job id's run ended, as its sandbox reported it: the
// outcome, tokens and the output references (a cancelled job keeps them
// too). A report without a job report is a crash. A job already over stays
// as it is.
func (s *Service) Finished(ctx context.Context, id string, rep *sandboxwire.JobReport) error {
	if rep == nil {
		return s.Crashed(ctx, id, "The sandbox ended without a job report.")
	}
	j, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	now := s.o.Now().UTC()
	outputs, err := s.outputs(j.ID, rep, now)
	if err != nil {
		return err
	}
	if j.Status == Cancelled {
		if err := s.o.Store.AddOutputs(ctx, id, rep.TokensUsed, outputs); err != nil && !errors.Is(err, ErrConflict) {
			return err
		}
		return nil
	}
	if j.Status.Terminal() {
		return nil
	}
	c := Change{From: Live, To: Completed, FinishedAt: now, TokensUsed: rep.TokensUsed, Outputs: outputs}
	if j.StartedAt.IsZero() {
		c.StartedAt = now
		j.StartedAt = now
	}
	switch rep.Outcome {
	case sandboxwire.JobCompleted:
	case sandboxwire.JobFailed:
		c.To, c.Failure = Failed, failureOf(rep.Failure)
	case sandboxwire.JobCancelled:
		c.To = Cancelled
	default:
		c.To, c.Failure = Failed, &Failure{Category: sandboxwire.FailureCrash, Message: "The sandbox reported an unknown outcome."}
	}
	j.TokensUsed, j.Outputs, j.Failure = c.TokensUsed, outputs, c.Failure
	var evs []Pending
	if j.Status == Created {
		evs = append(evs, s.event(j, jobevents.Started, now))
	}
	if len(outputs) > 0 && c.To == Completed {
		evs = append(evs, s.event(j, jobevents.OutputGenerated, now))
	}
	evs = append(evs, s.event(j, map[Status]jobevents.DetailType{Completed: jobevents.Completed, Failed: jobevents.Failed, Cancelled: jobevents.Cancelled}[c.To], now))
	_, err = s.o.Store.Transition(ctx, id, s.expiring(c), evs)
	if errors.Is(err, ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	s.Flush(ctx, id)
	return nil
}

// Crashed fails a live job with category crash.
func (s *Service) Crashed(ctx context.Context, id, message string) error {
	return s.failAs(ctx, id, sandboxwire.FailureCrash, message)
}

// OutOfMemory fails live job id with category memory_limit: its sandbox was
// killed for its memory.
func (s *Service) OutOfMemory(ctx context.Context, id, message string) error {
	return s.failAs(ctx, id, sandboxwire.FailureMemoryLimit, message)
}

// IsolationUnavailable fails live job id with category policy_violation:
// it has no network, and its sandbox could not be launched cut off from
// the network (message says why), so nothing of it ran.
func (s *Service) IsolationUnavailable(ctx context.Context, id, message string) error {
	return s.failAs(ctx, id, sandboxwire.FailurePolicyViolation, sandboxwire.IsolationUnavailable+message)
}

// failAs fails live job id with category and message (a job already over
// stays as it is).
func (s *Service) failAs(ctx context.Context, id string, category sandboxwire.FailureCategory, message string) error {
	j, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	if j.Status.Terminal() {
		return nil
	}
	now := s.o.Now().UTC()
	c := Change{From: Live, To: Failed, FinishedAt: now, Failure: &Failure{Category: category, Message: message}}
	j.Failure = c.Failure
	_, err = s.o.Store.Transition(ctx, id, s.expiring(c), []Pending{s.event(j, jobevents.Failed, now)})
	if errors.Is(err, ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	s.Flush(ctx, id)
	return nil
}

func failureOf(f *sandboxwire.JobFailure) *Failure {
	if f == nil || !slices.Contains(categories, f.Category) {
		return &Failure{Category: sandboxwire.FailureCrash, Message: "The job failed without a known category."}
	}
	msg := f.Message
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	return &Failure{Category: f.Category, Message: msg}
}

// outputs turns a report's uploads into references: only keys under the
// job's own prefix are taken.
func (s *Service) outputs(jobID string, rep *sandboxwire.JobReport, now time.Time) ([]Output, error) {
	files := rep.Outputs
	if len(files) > MaxOutputs-1 {
		return nil, fmt.Errorf("job %s reported %d outputs, more than %d", jobID, len(files), MaxOutputs-1)
	}
	var out []Output
	add := func(t OutputType, f sandboxwire.JobFile) {
		if !strings.HasPrefix(f.Key, KeyPrefix(jobID)) || strings.Contains(f.Key, "..") || f.SizeBytes < 0 {
			s.o.Log.Warn("output outside the job's prefix ignored", "job_id", jobID)
			return
		}
		out = append(out, Output{ID: uuid.NewString(), JobID: jobID, Type: t, CreatedAt: now,
			Reference: Reference{Bucket: s.o.Bucket, Key: f.Key, Size: f.SizeBytes, SHA256: f.SHA256, Path: f.Path}})
	}
	for _, f := range files {
		add(OutputFile, f)
	}
	if rep.Log != nil {
		add(OutputLog, *rep.Log)
	}
	return out, nil
}

// KeyPrefix is where a job's uploads go in the bucket.
func KeyPrefix(jobID string) string { return "jobs/" + jobID + "/" }

// SessionOf returns the session of job id's sandbox, "" if it has none.
func (s *Service) SessionOf(ctx context.Context, id string) (string, error) {
	j, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return j.SessionID, err
}
