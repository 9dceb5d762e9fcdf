package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Resources are a job's resource figures (the spec's per-job tracking);
// nil where the platform does not know them.
type Resources struct {
	CPUUsage     *float64 `json:"cpuUsage"`
	MemoryUsage  *float64 `json:"memoryUsage"`
	TokensUsed   int64    `json:"tokensUsed"`
	Duration     int64    `json:"duration"`
	FilesCreated int      `json:"filesCreated"`
	LogsSize     int64    `json:"logsSize"`
}

// Alert is a limit a job is close to.
type Alert struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// View is a job as GET /internal/jobs/{id} shows it.
type View struct {
	ID          string       `json:"id"`
	CommandID   string       `json:"command_id"`
	PlanStepID  string       `json:"plan_step_id"`
	AgentID     string       `json:"agent_id"`
	IdentityID  string       `json:"identity_id"`
	ContextID   string       `json:"context_id"`
	Status      Status       `json:"status"`
	TokenLimit  int64        `json:"token_limit"`
	TokensUsed  int64        `json:"tokens_used"`
	Constraints *Constraints `json:"constraints,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	StartedAt   *time.Time   `json:"started_at"`
	FinishedAt  *time.Time   `json:"finished_at"`
	Failure     *Failure     `json:"failure"`
	Resources   Resources    `json:"resources"`
	Alerts      []Alert      `json:"alerts"`
	// Attempt is which run of its plan step the job is (1 for the first);
	// RetryOf the job it re-runs (POST …/retry).
	Attempt int     `json:"attempt"`
	RetryOf *string `json:"retry_of"`
}

// ViewOf is j as shown at now.
func ViewOf(j Job, now time.Time) View {
	v := View{ID: j.ID, CommandID: j.CommandID, PlanStepID: j.PlanStepID, AgentID: j.AgentID, IdentityID: j.IdentityID, ContextID: j.ContextID,
		Status: j.Status, TokenLimit: j.TokenLimit, TokensUsed: j.TokensUsed, Constraints: j.Constraints, CreatedAt: j.CreatedAt, Failure: j.Failure, Alerts: []Alert{},
		Attempt: max(j.Attempt, 1)}
	if j.RetryOf != "" {
		r := j.RetryOf
		v.RetryOf = &r
	}
	if !j.StartedAt.IsZero() {
		t := j.StartedAt
		v.StartedAt = &t
		end := now
		if !j.FinishedAt.IsZero() {
			end = j.FinishedAt
		}
		v.Resources.Duration = end.Sub(t).Milliseconds()
	}
	if !j.FinishedAt.IsZero() {
		t := j.FinishedAt
		v.FinishedAt = &t
	}
	v.Resources.TokensUsed = j.TokensUsed
	for _, o := range j.Outputs {
		switch o.Type {
		case OutputFile:
			v.Resources.FilesCreated++
		case OutputLog:
			v.Resources.LogsSize += o.Reference.Size
		}
	}
	if j.TokenLimit > 0 && j.TokensUsed*10 > j.TokenLimit*9 {
		v.Alerts = append(v.Alerts, Alert{Type: "token_usage", Message: fmt.Sprintf("%d of %d tokens used (over 90%%).", j.TokensUsed, j.TokenLimit)})
	}
	if c := j.Constraints; c != nil && c.Timeout != nil && j.Status == Running && v.Resources.Duration*10 > int64(*c.Timeout)*1000*8 {
		v.Alerts = append(v.Alerts, Alert{Type: "execution_time", Message: "The job has run over 80% of its timeout."})
	}
	return v
}

// Outputs returns the job's output references.
func (s *Service) Outputs(ctx context.Context, h Headers, id string) ([]Output, error) {
	j, err := s.Get(ctx, h, id)
	if err != nil {
		return nil, err
	}
	if j.Outputs == nil {
		return []Output{}, nil
	}
	return j.Outputs, nil
}

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.o.Now() }

// LogPage is a read of a job's log: its events after a cursor while it runs
// (Events, Next), or, once it is over and its log was uploaded, the whole log
// (Whole).
type LogPage struct {
	Status Status
	Events []session.Event
	// Next is the cursor to ask with next time.
	Next  int64
	Whole io.ReadCloser
	Size  int64
}

// LogPageSize bounds the events of one log read.
const LogPageSize = 200

// Reader opens objects of the bucket (blob.Store).
type Reader interface {
	Get(ctx context.Context, key string) (io.ReadCloser, blob.Object, error)
}

// MaxLogWait bounds how long a log read waits for new lines (under API
// Gateway's 29 s).
const MaxLogWait = 20 * time.Second

// logPoll is how often a waiting log read looks for new lines.
const logPoll = 250 * time.Millisecond

// Logs reads job id's log after cursor after. A read that finds nothing new
// while the job runs waits up to wait (at most MaxLogWait) for a line, or
// the job's end: the orchestrator follows a running job's log with one read
// after another, each resuming at the cursor the last returned.
func (s *Service) Logs(ctx context.Context, h Headers, id string, after int64, wait time.Duration) (LogPage, error) {
	deadline := time.Now().Add(min(max(wait, 0), MaxLogWait))
	for {
		page, err := s.logs(ctx, h, id, after)
		if err != nil || page.Whole != nil || len(page.Events) > 0 || page.Status.Terminal() || !time.Now().Before(deadline) {
			return page, err
		}
		select {
		case <-ctx.Done():
			return page, nil
		case <-time.After(min(logPoll, time.Until(deadline))):
		}
	}
}

func (s *Service) logs(ctx context.Context, h Headers, id string, after int64) (LogPage, error) {
	j, err := s.Get(ctx, h, id)
	if err != nil {
		return LogPage{}, err
	}
	page := LogPage{Status: j.Status, Next: max(after, 0)}
	if j.Status.Terminal() && s.o.Logs != nil {
		for _, o := range j.Outputs {
			if o.Type == OutputLog && strings.HasPrefix(o.Reference.Key, KeyPrefix(j.ID)) {
				r, obj, err := s.o.Logs.Get(ctx, o.Reference.Key)
				if err != nil {
					return LogPage{}, fmt.Errorf("open log of job %s: %w", j.ID, err)
				}
				page.Whole, page.Size = r, obj.Size
				return page, nil
			}
		}
	}
	if j.SessionID == "" {
		return page, nil
	}
	evs, err := s.o.Sessions.Events(ctx, j.SessionID, page.Next, LogPageSize)
	if err != nil {
		return LogPage{}, err
	}
	page.Events = evs
	if len(evs) > 0 {
		page.Next = evs[len(evs)-1].Seq
	}
	return page, nil
}

// PutProfile writes profile id from in.
func (s *Service) PutProfile(ctx context.Context, id string, in ProfileInput) (Profile, error) {
	if !ValidUUID(id) {
		return Profile{}, apierror.New(apierror.InvalidRequest, "The agent id must be a UUID.")
	}
	if msg := in.Validate(s.o.AllowScripted); msg != "" {
		return Profile{}, apierror.New(apierror.InvalidRequest, "%s", msg)
	}
	now := s.o.Now().UTC()
	temp := DefaultTemperature
	if in.Temperature != nil {
		temp = *in.Temperature
	}
	p := Profile{ID: strings.ToLower(id), Name: in.Name, Level: in.Level, Provider: in.Provider, Model: in.Model, MaxTokens: in.MaxTokens,
		Temperature: temp, AllowedSkills: in.AllowedSkills, Agentfiles: in.Agentfiles, WarmPoolSize: in.WarmPoolSize, CreatedAt: now, UpdatedAt: now}
	return s.o.Store.PutProfile(ctx, p)
}

// Profile reads profile id.
func (s *Service) Profile(ctx context.Context, id string) (Profile, error) {
	if !ValidUUID(id) {
		return Profile{}, apierror.New(apierror.AgentProfileNotFound, "No such agent profile.")
	}
	p, err := s.o.Store.Profile(ctx, strings.ToLower(id))
	if isNotFound(err) {
		return Profile{}, apierror.New(apierror.AgentProfileNotFound, "No such agent profile.")
	}
	return p, err
}

// Profiles lists profiles, a page after cursor.
func (s *Service) Profiles(ctx context.Context, cursor string) ([]Profile, string, error) {
	ps, next, err := s.o.Store.Profiles(ctx, cursor, 100)
	if err != nil && strings.Contains(err.Error(), "cursor") {
		return nil, "", apierror.New(apierror.InvalidRequest, "Invalid cursor.")
	}
	return ps, next, err
}

// RateLimitAlertWindow is how long after a provider limited a running
// job's calls its view alerts of it.
const RateLimitAlertWindow = 5 * time.Minute

// Live is j as shown now, with what its sandbox's session knows: while it
// runs, tokens_used is what its model calls used so far, as the model
// gateway metered them; its CPU and memory are its sandbox's last measure
// (alert past 80 % of its memory constraint); a provider's limiting its
// calls in the last RateLimitAlertWindow is an alert.
func (s *Service) Live(ctx context.Context, j Job) View {
	if j.SessionID == "" {
		return ViewOf(j, s.o.Now())
	}
	sess, err := s.o.Sessions.Get(ctx, j.SessionID)
	if err != nil {
		return ViewOf(j, s.o.Now())
	}
	return s.liveWith(j, sess)
}

// liveWith is j's live view with what its sandbox's session sess knows.
func (s *Service) liveWith(j Job, sess session.Session) View {
	if j.Status == Running {
		u := sess.Usage()
		j.TokensUsed = max(j.TokensUsed, u.InputTokens+u.OutputTokens)
	}
	now := s.o.Now()
	v := ViewOf(j, now)
	if r := sess.Resources; r != nil {
		cpu, mem := r.CPUPercent, r.MemoryMB
		v.Resources.CPUUsage, v.Resources.MemoryUsage = &cpu, &mem
		if j.Status == Running {
			// What the job made so far, as its sandbox last measured it.
			v.Resources.FilesCreated = max(v.Resources.FilesCreated, r.Files)
			v.Resources.LogsSize = max(v.Resources.LogsSize, r.LogBytes)
		}
		if c := j.Constraints; c != nil && c.Memory != nil && mem*10 > float64(*c.Memory)*8 {
			v.Alerts = append(v.Alerts, Alert{Type: "memory_usage", Message: fmt.Sprintf("%.0f MB of the %d MB memory limit used (over 80%%).", mem, *c.Memory)})
		}
	}
	if j.Status == Running && !sess.RateLimitedAt.IsZero() && now.Sub(sess.RateLimitedAt) < RateLimitAlertWindow {
		v.Alerts = append(v.Alerts, Alert{Type: "rate_limit", Message: "The model provider is limiting (or about to limit) the job's calls."})
	}
	return v
}

// Alert publishes AGENT.JOB.ALERT for each alert of running job id's view,
// with sess its sandbox's session as it now is, that was not published
// yet: once per kind of alert and job. The sandbox channel calls it on each
// heartbeat of a job's sandbox.
func (s *Service) Alert(ctx context.Context, id string, sess session.Session) error {
	j, err := s.o.Store.Get(ctx, id)
	if err != nil {
		return err
	}
	if j.Status != Running || j.SessionID != sess.ID {
		return nil
	}
	now := s.o.Now()
	published := false
	for _, a := range s.liveWith(j, sess).Alerts {
		if slices.Contains(j.Alerted, a.Type) || !slices.Contains(alertKinds, a.Type) {
			continue
		}
		ev := s.event(j, jobevents.Alert, now)
		ev.Seq, ev.Event.ID = alertSeq(a.Type), j.ID+":agent.job.alert."+a.Type
		ev.Event.Detail.Alert = &jobevents.AlertDetail{Type: a.Type, Message: a.Message}
		err := s.o.Store.Alerted(ctx, id, a.Type, ev)
		if errors.Is(err, ErrConflict) {
			continue // published meanwhile, or the job ended
		}
		if err != nil {
			return err
		}
		published = true
	}
	if published {
		s.Flush(ctx, id)
	}
	return nil
}
