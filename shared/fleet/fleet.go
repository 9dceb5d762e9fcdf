package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/appkey"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Store is what the fleet reads and changes of sessions: one by id, a
// tenant's page, a state change (a kill) and an egress policy. Its Transition should push the
// stop to the session's sandbox (session.Pushing).
type Store interface {
	// Get reads a session; session.ErrNotFound if absent.
	Get(ctx context.Context, id string) (session.Session, error)
	// Transition applies c and returns the session as changed, or
	// session.ErrConflict.
	Transition(ctx context.Context, id string, c session.Change) (session.Session, error)
	// ListByTenant reads a page of a tenant's sessions (session.Fleet);
	// session.ErrBadCursor for a cursor it did not return to this tenant.
	ListByTenant(ctx context.Context, tenant string, f session.ListFilter, limit int, after string) ([]session.Session, string, error)
	// SetEgress replaces the egress policy of a live session whose policy
	// is still of version; session.ErrConflict otherwise.
	SetEgress(ctx context.Context, id string, version int, p egress.Policy) (session.Session, error)
}

// Publisher sends jobs-queue messages (session.stop, for a kill).
type Publisher interface {
	Publish(ctx context.Context, m jobqueue.Message, delay time.Duration) error
}

// Options configure a Service.
type Options struct {
	Store Store
	// Keys are the app keys callers authenticate with (registry.Store).
	Keys appkey.Keys
	// Jobs queues the stop of a killed session's sandbox.
	Jobs Publisher
	// Limits are the platform's session limits (an agent type may lower
	// them); a zero part is no bound.
	Limits registry.SessionLimits
	// Checkpoints keeps agents' checkpoints (nil: agents cannot pause).
	Checkpoints *checkpoint.Service
	// Wait bounds how long a pause or a resume waits for the agent (the
	// creation timeout; 0: 30 s).
	Wait time.Duration
	Log  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service lists and kills an app's agents.
type Service struct {
	o    Options
	auth *appkey.Authenticator
}

// New returns a fleet service with options o.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Service{o: o, auth: appkey.New(o.Keys)}
}

// Authenticate returns the app key a bearer secret belongs to (appkey).
func (s *Service) Authenticate(ctx context.Context, secret string) (registry.AppKey, error) {
	return s.auth.Authenticate(ctx, secret)
}

// Fleet list limits: a page holds at most MaxListLimit agents
// (DefaultListLimit when the caller names none), and one call reads at most
// listRounds pages of the index, so that a page's cost never grows with the
// fleet, however selective its filters.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
	listRounds       = 8
)

// maxCursorLen bounds a cursor from a request (ours are well under it).
const maxCursorLen = 1024

// ListQuery is a page request of the fleet list (GET /api/remote_agents).
type ListQuery struct {
	session.ListFilter
	// Limit is the page size, 1..MaxListLimit; 0 means DefaultListLimit.
	Limit int
	// Cursor is a previous page's next_cursor; "" starts.
	Cursor string
}

// AgentSummary is one agent of the fleet list.
type AgentSummary struct {
	AgentID string        `json:"agent_id"`
	State   session.State `json:"state"`
	// Status is State in the workspace spec's words (StatusOf).
	Status      string `json:"status"`
	Alive       bool   `json:"alive"`
	AgentType   string `json:"agent_type,omitempty"`
	ProjectName string `json:"project_name,omitempty"`
	PersonaSlug string `json:"persona_slug"`
	CreatedAt   string `json:"created_at"`
	EndedAt     string `json:"ended_at,omitempty"`
	// EndReason says why an ended or failed agent ended.
	EndReason session.Reason `json:"end_reason,omitempty"`
	Usage     session.Usage  `json:"usage"`
	// Remaining is what a live agent has left of its limits (absent once
	// it is over).
	Remaining *session.Remaining `json:"remaining,omitempty"`
}

// ListPage is one page of the fleet list. NextCursor is null at the end; a
// page may hold fewer than the limit with a cursor to go on.
type ListPage struct {
	Agents     []AgentSummary `json:"agents"`
	NextCursor *string        `json:"next_cursor"`
}

// List returns a page of app's tenant's agents, newest first. An app sees
// only its tenant's agents: the index is keyed by tenant and a cursor of
// another tenant is refused.
func (s *Service) List(ctx context.Context, app registry.AppKey, q ListQuery) (ListPage, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 1 || limit > MaxListLimit:
		return ListPage{}, apierror.New(apierror.InvalidRequest, "limit must be between 1 and %d.", MaxListLimit)
	}
	if len(q.Cursor) > maxCursorLen {
		return ListPage{}, apierror.New(apierror.InvalidRequest, "cursor is not one this list returned.")
	}
	page := ListPage{Agents: []AgentSummary{}}
	cursor := q.Cursor
	now := s.o.Now()
	for range listRounds {
		got, next, err := s.o.Store.ListByTenant(ctx, app.Tenant, q.ListFilter, limit-len(page.Agents), cursor)
		if errors.Is(err, session.ErrBadCursor) {
			return ListPage{}, apierror.New(apierror.InvalidRequest, "cursor is not one this list returned.")
		}
		if err != nil {
			return ListPage{}, fmt.Errorf("list sessions: %w", err)
		}
		for _, sess := range got {
			page.Agents = append(page.Agents, summary(sess, session.EffectiveLimits(s.o.Limits, sess), now))
		}
		cursor = next
		if cursor == "" || len(page.Agents) >= limit {
			break
		}
	}
	if cursor != "" {
		page.NextCursor = &cursor
	}
	return page, nil
}

func summary(sess session.Session, limits registry.SessionLimits, now time.Time) AgentSummary {
	out := AgentSummary{
		AgentID:     sess.ID,
		State:       sess.State,
		Status:      session.StatusOf(sess.State),
		Alive:       slices.Contains(session.Live, sess.State) && !sess.Lost(now),
		AgentType:   sess.AgentType,
		ProjectName: sess.ProjectName,
		PersonaSlug: sess.PersonaSlug,
		CreatedAt:   sess.CreatedAt.UTC().Format(time.RFC3339Nano),
		Usage:       sess.Usage(),
	}
	if !sess.State.Terminal() {
		r := session.RemainingOf(limits, sess, now)
		out.Remaining = &r
	}
	if sess.State.Terminal() {
		out.EndReason = sess.Reason
		if !sess.EndedAt.IsZero() {
			out.EndedAt = sess.EndedAt.UTC().Format(time.RFC3339Nano)
		}
	}
	return out
}

// KillStatus answers the kill route.
type KillStatus struct {
	AgentID string `json:"agent_id"`
	// Status is "killed", or AlreadyTerminated for an agent that had ended.
	Status string         `json:"status"`
	State  session.State  `json:"state"`
	Reason session.Reason `json:"reason,omitempty"`
}

// Killed is the status of a kill that ended the agent.
const Killed = "killed"

// maxKillRetries bounds how often a kill looks again at a session that
// moved meanwhile.
const maxKillRetries = 3

// Kill ends a session at once, with no grace: the session is ended (reason
// killed) before the answer, so its streams close and its tokens stop with
// TokenGrace, and session.stop, queued with no delay, stops its sandbox
// without waiting (jobworker gives a killed session's sandbox no grace). The
// bearer is the app key of the session's tenant or the session's token. A
// kill of a killed session queues the stop again (it is idempotent), so a
// kill whose stop could not be queued is finished by a retry.
func (s *Service) Kill(ctx context.Context, id, bearer string) (KillStatus, error) {
	for range maxKillRetries {
		sess, err := s.killAuthorize(ctx, id, bearer)
		if err != nil {
			return KillStatus{}, err
		}
		status := Killed
		switch {
		case sess.State.Terminal() && sess.Reason != session.ReasonKilled:
			return KillStatus{AgentID: id, Status: session.AlreadyTerminated, State: sess.State, Reason: sess.Reason}, nil
		case sess.State.Terminal():
			status = session.AlreadyTerminated // killed before: queue its stop again
		default:
			sess, err = s.o.Store.Transition(ctx, id, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonKilled})
			if errors.Is(err, session.ErrConflict) {
				continue // it moved meanwhile: look again
			}
			if err != nil {
				return KillStatus{}, err
			}
		}
		if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStop, SessionID: id, Generation: sess.Generation}, 0); err != nil {
			s.o.Log.WarnContext(ctx, "publish session.stop for a kill", slog.String("session_id", id), slog.String("error", err.Error()))
			return KillStatus{}, &apierror.Error{
				Code:       apierror.ServiceUnavailable,
				Message:    "The agent is ended, but its sandbox's stop could not be queued; retry the kill.",
				RetryAfter: apierror.UnavailableRetryAfter,
			}
		}
		return KillStatus{AgentID: id, Status: status, State: sess.State, Reason: session.ReasonKilled}, nil
	}
	return KillStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent is changing state; try again.", RetryAfter: 1}
}

// Authorize finds the session id and checks that bearer may act on it: an
// app key of its tenant, or one of its session tokens (killAuthorize).
func (s *Service) Authorize(ctx context.Context, id, bearer string) (session.Session, error) {
	return s.killAuthorize(ctx, id, bearer)
}

// killAuthorize finds the session a kill names and checks its bearer: an app
// key of the session's tenant, or one of its session tokens (by its form;
// anything else is taken for an app key). An agent of
// another tenant is not found, as an unknown one is.
func (s *Service) killAuthorize(ctx context.Context, id, bearer string) (session.Session, error) {
	return session.AuthorizeAgent(ctx, s.o.Store, s.Authenticate, id, bearer, s.o.Now())
}

// ParseListQuery reads the fleet list's query parameters: project_name,
// persona_slug, agent_type, state (comma-separated states), alive (true:
// the live states; false: ended and failed), limit and cursor. Any other parameter is refused, as are
// unknown states and a limit that is not a number in range.
func ParseListQuery(params map[string]string) (ListQuery, error) {
	var q ListQuery
	bad := func(format string, args ...any) (ListQuery, error) {
		return ListQuery{}, apierror.New(apierror.InvalidRequest, format, args...)
	}
	for name, v := range params {
		if len(v) > maxCursorLen {
			return bad("%q is too long.", name)
		}
		switch name {
		case "project_name":
			q.ProjectName = v
		case "persona_slug":
			q.PersonaSlug = v
		case "agent_type":
			q.AgentType = v
		case "cursor":
			q.Cursor = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxListLimit {
				return bad("limit must be a number between 1 and %d.", MaxListLimit)
			}
			q.Limit = n
		case "alive":
			switch v {
			case "true":
				q.States = append(q.States, session.Live...)
			case "false":
				q.States = append(q.States, session.Ended, session.Failed)
			case "":
			default:
				return bad("alive must be true or false.")
			}
		case "state":
			for st := range strings.SplitSeq(v, ",") {
				if !slices.Contains(allStates, session.State(st)) {
					return bad("state %q is not one of %s.", st, joinStates(allStates))
				}
				q.States = append(q.States, session.State(st))
			}
		default:
			return bad("Unknown query parameter %q: use project_name, persona_slug, agent_type, state, alive, limit, cursor.", name)
		}
	}
	if params["alive"] != "" && params["state"] != "" {
		return bad("Use state or alive, not both.")
	}
	return q, nil
}

var allStates = []session.State{session.Provisioning, session.Ready, session.Working, session.Idle, session.Ending, session.Ended, session.Failed,
	session.Pausing, session.Paused, session.Resuming}

func joinStates(ss []session.State) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}
