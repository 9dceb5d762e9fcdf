package session

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
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/token"
)

// ReasonKilled: the session was killed (POST kill): stopped at once, no grace.
const ReasonKilled Reason = "killed"

// Fleet list limits: a page holds at most MaxListLimit agents
// (DefaultListLimit when the caller names none), and one call reads at most
// listRounds pages of the index, so that a page's cost never grows with the
// fleet, however selective its filters.
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
	listRounds       = 8
)

// listKeyLayout is fixed-width, so that list keys sort as times do.
const listKeyLayout = "20060102T150405.000000000Z"

// ListKey is the fleet list's sort key of a session created at t: its UTC
// creation time to the nanosecond, fixed width, then its id, so that a
// tenant's sessions have one stable order, ties included.
func ListKey(t time.Time, id string) string {
	return t.UTC().Format(listKeyLayout) + "#" + id
}

// ListFilter selects sessions of the fleet list; zero fields select all.
type ListFilter struct {
	ProjectName string
	PersonaSlug string
	AgentType   string
	// States, if not empty, are the states to list.
	States []State
}

// ListQuery is a page request of the fleet list (GET /api/remote_agents).
type ListQuery struct {
	ListFilter
	// Limit is the page size, 1..MaxListLimit; 0 means DefaultListLimit.
	Limit int
	// Cursor is a previous page's next_cursor; "" starts.
	Cursor string
}

// AgentSummary is one agent of the fleet list.
type AgentSummary struct {
	AgentID     string `json:"agent_id"`
	State       State  `json:"state"`
	Alive       bool   `json:"alive"`
	AgentType   string `json:"agent_type,omitempty"`
	ProjectName string `json:"project_name,omitempty"`
	PersonaSlug string `json:"persona_slug"`
	CreatedAt   string `json:"created_at"`
	EndedAt     string `json:"ended_at,omitempty"`
	// EndReason says why an ended or failed agent ended.
	EndReason Reason `json:"end_reason,omitempty"`
	Usage     Usage  `json:"usage"`
	// Remaining is what a live agent has left of its limits (absent once
	// it is over).
	Remaining *Remaining `json:"remaining,omitempty"`
}

// ListPage is one page of the fleet list. NextCursor is null at the end; a
// page may hold fewer than the limit with a cursor to go on.
type ListPage struct {
	Agents     []AgentSummary `json:"agents"`
	NextCursor *string        `json:"next_cursor"`
}

// ErrBadCursor: a list cursor that is not one the list returned to the caller.
var ErrBadCursor = errors.New("invalid list cursor")

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
		if errors.Is(err, ErrBadCursor) {
			return ListPage{}, apierror.New(apierror.InvalidRequest, "cursor is not one this list returned.")
		}
		if err != nil {
			return ListPage{}, fmt.Errorf("list sessions: %w", err)
		}
		for _, sess := range got {
			page.Agents = append(page.Agents, summary(sess, EffectiveLimits(s.o.Limits, sess), now))
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

// maxCursorLen bounds a cursor from a request (ours are well under it).
const maxCursorLen = 1024

func summary(sess Session, limits registry.SessionLimits, now time.Time) AgentSummary {
	out := AgentSummary{
		AgentID:     sess.ID,
		State:       sess.State,
		Alive:       slices.Contains(Live, sess.State) && !sess.Lost(now),
		AgentType:   sess.AgentType,
		ProjectName: sess.ProjectName,
		PersonaSlug: sess.PersonaSlug,
		CreatedAt:   sess.CreatedAt.UTC().Format(time.RFC3339Nano),
		Usage:       sess.Usage(),
	}
	if !sess.State.Terminal() {
		r := remainingOf(limits, sess, now)
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
	Status string `json:"status"`
	State  State  `json:"state"`
	Reason Reason `json:"reason,omitempty"`
}

// Killed is the status of a kill that ended the agent.
const Killed = "killed"

// Kill ends a session at once, with no grace: the session is ended (reason
// killed) before the answer, so its streams close and its tokens stop with
// TokenGrace, and session.stop, queued with no delay, stops its sandbox
// without waiting (jobworker gives a killed session's sandbox no grace). The
// bearer is the app key of the session's tenant or the session's token. A
// kill of a killed session queues the stop again (it is idempotent), so a
// kill whose stop could not be queued is finished by a retry.
func (s *Service) Kill(ctx context.Context, id, bearer string) (KillStatus, error) {
	for range maxShutdownRetries {
		sess, err := s.killAuthorize(ctx, id, bearer)
		if err != nil {
			return KillStatus{}, err
		}
		status := Killed
		switch {
		case sess.State.Terminal() && sess.Reason != ReasonKilled:
			return KillStatus{AgentID: id, Status: AlreadyTerminated, State: sess.State, Reason: sess.Reason}, nil
		case sess.State.Terminal():
			status = AlreadyTerminated // killed before: queue its stop again
		default:
			sess, err = s.o.Store.Transition(ctx, id, Change{From: Live, To: Ended, Reason: ReasonKilled})
			if errors.Is(err, ErrConflict) {
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
		return KillStatus{AgentID: id, Status: status, State: sess.State, Reason: ReasonKilled}, nil
	}
	return KillStatus{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent is changing state; try again.", RetryAfter: 1}
}

// killAuthorize finds the session a kill names and checks its bearer: an app
// key of the session's tenant, or one of its session tokens (by its form;
// anything else is taken for an app key). An agent of
// another tenant is not found, as an unknown one is.
func (s *Service) killAuthorize(ctx context.Context, id, bearer string) (Session, error) {
	if bearer == "" || token.Check(token.Session, bearer) == nil {
		return s.authorize(ctx, id, bearer)
	}
	app, err := s.Authenticate(ctx, bearer)
	if err != nil {
		return Session{}, err
	}
	notFound := apierror.New(apierror.AgentNotFound, "No agent has the id %q.", id)
	if !sessionID.MatchString(id) {
		return Session{}, notFound
	}
	sess, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && sess.Tenant != app.Tenant) {
		return Session{}, notFound
	}
	if err != nil {
		return Session{}, err
	}
	return sess, nil
}

// Matches reports whether s is selected by f (stores that cannot filter in
// their query use it; dynamo.Sessions filters in DynamoDB).
func Matches(s Session, f ListFilter) bool {
	return (f.ProjectName == "" || s.ProjectName == f.ProjectName) &&
		(f.PersonaSlug == "" || s.PersonaSlug == f.PersonaSlug) &&
		(f.AgentType == "" || s.AgentType == f.AgentType) &&
		(len(f.States) == 0 || slices.Contains(f.States, s.State))
}

// ParseListQuery reads the fleet list's query parameters: project_name,
// persona_slug, agent_type, state (comma-separated states), alive=true (the
// live states), limit and cursor. Any other parameter is refused, as are
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
				q.States = append(q.States, Live...)
			case "false", "":
			default:
				return bad("alive must be true or false.")
			}
		case "state":
			for st := range strings.SplitSeq(v, ",") {
				if !slices.Contains(allStates, State(st)) {
					return bad("state %q is not one of %s.", st, joinStates(allStates))
				}
				q.States = append(q.States, State(st))
			}
		default:
			return bad("Unknown query parameter %q: use project_name, persona_slug, agent_type, state, alive, limit, cursor.", name)
		}
	}
	if params["alive"] == "true" && params["state"] != "" {
		return bad("Use state or alive=true, not both.")
	}
	return q, nil
}

var allStates = []State{Provisioning, Ready, Working, Idle, Ending, Ended, Failed}

func joinStates(ss []State) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}
