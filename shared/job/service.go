package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Store persists jobs, their outbox and the agent profiles. Every write is
// conditional; nothing is written when a condition fails.
type Store interface {
	// Create writes j, its plan step's claim and the events of the outbox,
	// all or nothing. ErrStepTaken (and the job that holds the step) when
	// the plan step has a job.
	Create(ctx context.Context, j Job, events []Pending) (Job, error)
	// Get reads a job, strongly consistent; ErrNotFound if absent.
	Get(ctx context.Context, id string) (Job, error)
	// Transition applies c and writes the events to the outbox, all or
	// nothing, and returns the job as changed; ErrConflict if the job's
	// status is not one c leaves.
	Transition(ctx context.Context, id string, c Change, events []Pending) (Job, error)
	// AttachSession records the session of a created job's sandbox unless
	// it has one; ErrConflict otherwise (the job returned as it is).
	AttachSession(ctx context.Context, id, sessionID string) (Job, error)
	// AddOutputs records outputs and tokens on a cancelled job that has
	// none yet (what its sandbox kept); ErrConflict otherwise.
	AddOutputs(ctx context.Context, id string, tokens int64, outputs []Output) error
	// Outbox returns the pending events of job id in order (id "" all jobs',
	// at most limit, by job id). A job's own are those its writes put
	// there; the sweep's (id "") are every one, wherever the store keeps it.
	Outbox(ctx context.Context, id string, limit int) ([]Pending, error)
	// Published removes an event from the outbox.
	Published(ctx context.Context, p Pending) error
	// Retry writes next, a new attempt of old's plan step, moves the step's
	// claim from old to it, and writes the events, all or nothing;
	// ErrStepTaken (and the job that holds the step) when the step's claim
	// is not old's any more.
	Retry(ctx context.Context, old, next Job, events []Pending) (Job, error)
	// Running lists the ids of running jobs, at most limit.
	Running(ctx context.Context, limit int) ([]string, error)
	// Alerted records that a running job's alert of kind was published,
	// with its event in the outbox, all or nothing; ErrConflict if it was
	// already, or the job no longer runs.
	Alerted(ctx context.Context, id, kind string, event Pending) error

	// PutProfile writes a profile, keeping its created_at if it exists.
	PutProfile(ctx context.Context, p Profile) (Profile, error)
	// Profile reads a profile; ErrNotFound if absent.
	Profile(ctx context.Context, id string) (Profile, error)
	// Profiles lists profiles by name, a page after cursor.
	Profiles(ctx context.Context, cursor string, limit int) ([]Profile, string, error)
}

// Dispatcher puts messages on the jobs queue (jobqueue.Publisher).
type Dispatcher interface {
	Publish(ctx context.Context, m jobqueue.Message, delay time.Duration) error
}

// Sessions is the part of the session store jobs use: the session of a job's
// sandbox, and its events (the job's live log).
type Sessions interface {
	Create(ctx context.Context, s session.Session, rec *session.IdempotencyRecord) error
	Get(ctx context.Context, id string) (session.Session, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, error)
	// Transition tells a timed-out job's sandbox to stop (ending).
	Transition(ctx context.Context, id string, c session.Change) (session.Session, error)
}

// Options configure a Service.
type Options struct {
	Store     Store
	Publisher jobevents.Publisher
	Jobs      Dispatcher
	Sessions  Sessions
	// Bucket is the bucket a job's uploads are in (output references), and
	// Logs reads them (the whole log of a finished job).
	Bucket string
	Logs   Reader
	// AllowScripted allows profiles of the scripted provider (dev stack).
	AllowScripted bool
	// Retention is how long a finished job is kept before it expires
	// (config RA_JOB_RETENTION_DAYS); zero: for ever.
	Retention time.Duration
	Log       *slog.Logger
	Now       func() time.Time
}

// Service is the orchestrator jobs' service.
type Service struct{ o Options }

// New returns a Service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{o: o}
}

func notFound() error { return apierror.New(apierror.JobNotFound, "No such job.") }

// Create creates the job of req's plan step and queues its run. A replay of
// the plan step's create with the same request answers its job (replayed);
// another request for the plan step is plan_step_conflict.
func (s *Service) Create(ctx context.Context, h Headers, req CreateRequest) (Job, bool, error) {
	if m := req.Mismatch(h); m != "" {
		return Job{}, false, apierror.New(apierror.InvalidRequest, "%s.", m)
	}
	if _, err := s.o.Store.Profile(ctx, strings.ToLower(req.AgentID)); errors.Is(err, ErrNotFound) {
		return Job{}, false, apierror.New(apierror.AgentProfileNotFound, "No agent profile with that agentId.")
	} else if err != nil {
		return Job{}, false, err
	}
	now := s.o.Now().UTC()
	j := Job{
		ID:          uuid.NewString(),
		CommandID:   strings.ToLower(req.CommandID),
		PlanStepID:  strings.ToLower(req.PlanStepID),
		AgentID:     strings.ToLower(req.AgentID),
		IdentityID:  strings.ToLower(req.IdentityID),
		ContextID:   strings.ToLower(req.ContextID),
		Status:      Created,
		TokenLimit:  req.TokenLimit,
		InputData:   string(req.InputData),
		Constraints: req.Constraints,
		RequestHash: req.Hash(),
		CreatedAt:   now,
	}
	got, err := s.o.Store.Create(ctx, j, []Pending{s.event(j, jobevents.Created, now)})
	if errors.Is(err, ErrStepTaken) {
		if got.RequestHash != j.RequestHash {
			return Job{}, false, apierror.New(apierror.PlanStepConflict, "The plan step has a job created from another request.")
		}
		// A replay: its job.run may have been lost with the first answer.
		return got, true, s.dispatch(ctx, got)
	}
	if err != nil {
		return Job{}, false, err
	}
	s.Flush(ctx, j.ID)
	return j, false, s.dispatch(ctx, j)
}

// Retry re-runs the plan step of failed (or cancelled) job id, on an
// explicit call: a new job, the step's next attempt, with the same agent,
// input, token limit and constraints, which the step's claim now names (a
// create replayed for the step answers it). The old job keeps its logs and
// outputs. The mandatory headers must be the job's identity, context and
// plan step; the command is the retry's. A retry sent again answers the
// attempt it made (replayed).
func (s *Service) Retry(ctx context.Context, h Headers, id string) (Job, bool, error) {
	old, err := s.Get(ctx, h, id)
	if err != nil {
		return Job{}, false, err
	}
	if !strings.EqualFold(h.PlanStepID, old.PlanStepID) {
		return Job{}, false, apierror.New(apierror.InvalidRequest, "%s must be the job's plan step.", HeaderPlanStep)
	}
	if old.Status != Failed && old.Status != Cancelled {
		return Job{}, false, apierror.New(apierror.PlanStepConflict, "The job is %s; only a failed or cancelled job's plan step can be retried.", old.Status)
	}
	now := s.o.Now().UTC()
	next := Job{
		ID: uuid.NewString(), CommandID: strings.ToLower(h.CommandID), PlanStepID: old.PlanStepID, AgentID: old.AgentID,
		IdentityID: old.IdentityID, ContextID: old.ContextID, Status: Created, TokenLimit: old.TokenLimit, InputData: old.InputData,
		Constraints: old.Constraints, RequestHash: old.RequestHash, CreatedAt: now,
		Attempt: max(old.Attempt, 1) + 1, RetryOf: old.ID,
	}
	got, err := s.o.Store.Retry(ctx, old, next, []Pending{s.event(next, jobevents.Created, now)})
	if errors.Is(err, ErrStepTaken) {
		if got.RetryOf == old.ID {
			// This retry, sent again: its job.run may have been lost.
			return got, true, s.dispatch(ctx, got)
		}
		return Job{}, false, apierror.New(apierror.PlanStepConflict, "The plan step has a later job than this one: retry that one.")
	}
	if err != nil {
		return Job{}, false, err
	}
	s.Flush(ctx, next.ID)
	return next, false, s.dispatch(ctx, next)
}

func (s *Service) dispatch(ctx context.Context, j Job) error {
	if j.Status != Created {
		return nil
	}
	if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.JobRun, JobID: j.ID}, 0); err != nil {
		return apierror.Unavailable(fmt.Errorf("queue job.run of %s: %w", j.ID, err))
	}
	return nil
}

// Get returns the job if it belongs to h's identity and context.
func (s *Service) Get(ctx context.Context, h Headers, id string) (Job, error) {
	if !ValidUUID(id) {
		return Job{}, notFound()
	}
	j, err := s.o.Store.Get(ctx, strings.ToLower(id))
	if errors.Is(err, ErrNotFound) {
		return Job{}, notFound()
	}
	if err != nil {
		return Job{}, err
	}
	if !strings.EqualFold(j.IdentityID, h.IdentityID) || !strings.EqualFold(j.ContextID, h.ContextID) {
		return Job{}, notFound()
	}
	return j, nil
}

// Cancel cancels a created or running job and stops its sandbox; what the
// sandbox produced is kept. A finished job is job_not_running.
func (s *Service) Cancel(ctx context.Context, h Headers, id string) (Job, error) {
	j, err := s.Get(ctx, h, id)
	if err != nil {
		return Job{}, err
	}
	if j.Status.Terminal() {
		return Job{}, apierror.New(apierror.JobNotRunning, "The job has %s; only a created or running job can be cancelled.", j.Status)
	}
	now := s.o.Now().UTC()
	after, err := s.o.Store.Transition(ctx, j.ID, s.expiring(Change{From: Live, To: Cancelled, FinishedAt: now}), []Pending{s.event(j, jobevents.Cancelled, now)})
	if errors.Is(err, ErrConflict) {
		return Job{}, apierror.New(apierror.JobNotRunning, "The job has finished; only a created or running job can be cancelled.")
	}
	if err != nil {
		return Job{}, err
	}
	s.Flush(ctx, j.ID)
	if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.JobCancel, JobID: j.ID}, 0); err != nil {
		// The sandbox finds its session over at its next heartbeat or report.
		s.o.Log.WarnContext(ctx, "queue job.cancel", slog.String("job_id", j.ID), slog.String("error", err.Error()))
	}
	return after, nil
}

// event is the outbox entry of a transition of j to t at time at.
func (s *Service) event(j Job, t jobevents.DetailType, at time.Time) Pending {
	status := map[jobevents.DetailType]Status{jobevents.Created: Created, jobevents.Started: Running, jobevents.OutputGenerated: Running, jobevents.Alert: Running,
		jobevents.Completed: Completed, jobevents.Failed: Failed, jobevents.Cancelled: Cancelled}[t]
	d := jobevents.Detail{JobID: j.ID, CommandID: j.CommandID, AgentID: j.AgentID, IdentityID: j.IdentityID, ContextID: j.ContextID,
		Status: string(status), Timestamp: at.UTC().Format(time.RFC3339Nano)}
	if t != jobevents.Created && t != jobevents.Started {
		tokens, outputs := j.TokensUsed, len(j.Outputs)
		d.Metadata = &jobevents.Metadata{TokensUsed: &tokens, Outputs: &outputs}
		if !j.StartedAt.IsZero() {
			ms := at.Sub(j.StartedAt).Milliseconds()
			d.Metadata.Duration = &ms
		}
		if t == jobevents.Failed && j.Failure != nil {
			d.Metadata.Failure = &jobevents.Failure{Category: string(j.Failure.Category), Message: j.Failure.Message}
		}
	}
	return Pending{JobID: j.ID, Seq: EventSeq(t), Event: jobevents.Event{ID: j.ID + ":" + strings.ToLower(string(t)), Type: t, Time: at.UTC(), Detail: d}}
}

// Flush publishes the pending events of job id in order and removes each
// once published; what fails stays for the next flush or the sweep.
func (s *Service) Flush(ctx context.Context, id string) {
	if err := s.flush(ctx, id); err != nil {
		s.o.Log.WarnContext(ctx, "publish job events: left for the sweep", slog.String("job_id", id), slog.String("error", err.Error()))
	}
}

func (s *Service) flush(ctx context.Context, id string) error {
	pending, err := s.o.Store.Outbox(ctx, id, 10)
	if err != nil {
		return err
	}
	for _, p := range pending {
		if err := s.o.Publisher.Publish(ctx, p.Event); err != nil {
			return fmt.Errorf("publish %s: %w", p.Event.ID, err)
		}
		if err := s.o.Store.Published(ctx, p); err != nil {
			return fmt.Errorf("clear %s from the outbox: %w", p.Event.ID, err)
		}
	}
	return nil
}

// sandboxGone reports whether a running job's sandbox is gone: its session
// over or lost.
func (s *Service) sandboxGone(ctx context.Context, j Job) (bool, error) {
	if j.SessionID == "" {
		return false, nil
	}
	sess, err := s.o.Sessions.Get(ctx, j.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return sess.State.Terminal() || sess.Lost(s.o.Now()), nil
}

// TimeoutGrace is how long past its timeout a running job's sandbox has to
// report its own timeout before the sweep fails the job (category timeout)
// and tells the sandbox to stop.
const TimeoutGrace = time.Minute

// MaxSweptJobs bounds the running jobs, and the outbox's events, one sweep
// reads: every one, at any scale a sweep's time allows (the store reads
// them page by page from every partition).
const MaxSweptJobs = 10000

// Sweep publishes what the outbox still holds (oldest first), fails, with
// category crash, running jobs whose sandbox is gone, and, with category
// timeout, running jobs past their timeout and TimeoutGrace whose sandbox
// did not end them (their sandbox is told to stop).
func (s *Service) Sweep(ctx context.Context) error {
	pending, err := s.o.Store.Outbox(ctx, "", MaxSweptJobs)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, p := range pending {
		if !done[p.JobID] {
			done[p.JobID] = true
			if err := s.flush(ctx, p.JobID); err != nil {
				return err
			}
		}
	}
	running, err := s.o.Store.Running(ctx, MaxSweptJobs)
	if err != nil {
		return err
	}
	for _, id := range running {
		j, err := s.o.Store.Get(ctx, id)
		if err != nil {
			continue
		}
		if s.overdue(j) {
			if err := s.timedOut(ctx, j); err != nil {
				return err
			}
			continue
		}
		gone, err := s.sandboxGone(ctx, j)
		if err != nil || !gone {
			continue
		}
		if err := s.Crashed(ctx, id, "The job's sandbox stopped without reporting."); err != nil {
			return err
		}
	}
	return nil
}

// Failure categories a report may carry.
var categories = []sandboxwire.FailureCategory{sandboxwire.FailureTimeout, sandboxwire.FailureTokenLimit, sandboxwire.FailureMemoryLimit,
	sandboxwire.FailureRateLimit, sandboxwire.FailureCrash, sandboxwire.FailurePolicyViolation}

// overdue reports whether running job j is past its timeout and
// TimeoutGrace.
func (s *Service) overdue(j Job) bool {
	if j.Status != Running || j.StartedAt.IsZero() || j.Constraints == nil || j.Constraints.Timeout == nil {
		return false
	}
	limit := time.Duration(*j.Constraints.Timeout)*time.Second + TimeoutGrace
	return s.o.Now().Sub(j.StartedAt) > limit
}

// timedOut fails job j with category timeout and tells its sandbox to stop
// (its session ending: the sandbox's next heartbeat, or its push, says so;
// a sandbox that no longer answers is stopped by the sessions' sweep).
func (s *Service) timedOut(ctx context.Context, j Job) error {
	msg := fmt.Sprintf("The job ran past its timeout of %d s and its sandbox did not end it: the platform did.", *j.Constraints.Timeout)
	if err := s.failAs(ctx, j.ID, sandboxwire.FailureTimeout, msg); err != nil {
		return err
	}
	if j.SessionID == "" {
		return nil
	}
	_, err := s.o.Sessions.Transition(ctx, j.SessionID, session.Change{From: session.Running, To: session.Ending, Reason: session.ReasonTimeout})
	if errors.Is(err, session.ErrConflict) || errors.Is(err, session.ErrNotFound) {
		return nil
	}
	return err
}

// expiring is c with the expiry of the job it finishes (Retention after it
// finished); c itself for a job that goes on, or without a retention.
func (s *Service) expiring(c Change) Change {
	if c.To.Terminal() && s.o.Retention > 0 && !c.FinishedAt.IsZero() {
		c.ExpiresAt = c.FinishedAt.Add(s.o.Retention).Unix()
	}
	return c
}
