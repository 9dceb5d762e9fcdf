// Package sandboxapi serves the sandbox channel, /sandbox/{sessionId}/…: the only
// way a sandbox touches platform state. Every route takes the sandbox token of that
// session's current launch, and nothing else.
//
//	GET  spec       what to run: guardrails, persona, initial prompt, flags
//	POST status     ready (with the guardrails hash used), working, idle, ended, failed
//	POST heartbeat  still alive; answers whether to stop
//	GET  inbox      what the sandbox must act on; stop once the session is ending
package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/token"
)

// Handlers serve the sandbox channel.
type Handlers struct {
	Store      session.Store
	Registry   registry.Store
	Guardrails guardrails.Source
	Reporter   session.Reporter
	Log        *slog.Logger
}

// Spec is what a sandbox runs.
type Spec struct {
	SessionID       string           `json:"session_id"`
	Generation      int              `json:"generation"`
	Guardrails      Guardrails       `json:"guardrails"`
	Persona         registry.Persona `json:"persona"`
	InitialPrompt   string           `json:"initial_prompt"`
	FeatureFlags    session.Features `json:"feature_flags"`
	TmuxSessionName string           `json:"tmux_session_name"`
}

// Guardrails is the platform guardrails document and its version.
type Guardrails struct {
	Content string `json:"content"`
	Hash    string `json:"hash"`
}

// StatusReport is what a sandbox reports.
type StatusReport struct {
	State          session.State  `json:"state"`
	GuardrailsHash string         `json:"guardrails_hash,omitempty"`
	Reason         session.Reason `json:"reason,omitempty"`
}

// Orders answers heartbeats and inbox reads.
type Orders struct {
	Stop  bool          `json:"stop"`
	State session.State `json:"state"`
	// Messages are the user messages after the inbox cursor (inbox only);
	// Next is the cursor to ask with next time.
	Messages []InboxMessage `json:"messages,omitempty"`
	Next     int64          `json:"next,omitempty"`
}

// InboxMessage is a message a user sent the agent.
type InboxMessage struct {
	Seq  int64  `json:"seq"`
	Text string `json:"text"`
	At   string `json:"at"`
}

// UserMessage is the event type of a user's message to the agent.
const UserMessage = "user.message"

// inboxPage bounds the events one inbox read looks at.
const inboxPage = 100

// Routes is the sandbox channel's route table.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{
		{Method: http.MethodGet, Pattern: "/sandbox/{sessionId}/spec", Handler: h.Spec},
		{Method: http.MethodPost, Pattern: "/sandbox/{sessionId}/status", Handler: h.Status},
		{Method: http.MethodPost, Pattern: "/sandbox/{sessionId}/heartbeat", Handler: h.Heartbeat},
		{Method: http.MethodGet, Pattern: "/sandbox/{sessionId}/inbox", Handler: h.Inbox},
		{Method: http.MethodPost, Pattern: "/sandbox/{sessionId}/events", Handler: h.Events},
	}
}

// Spec serves GET /sandbox/{sessionId}/spec.
func (h *Handlers) Spec(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	doc, err := guardrails.Load(ctx, h.Guardrails)
	if err != nil {
		h.Reporter.Report(ctx, report.Exception{
			Source: "guardrail_injection", Severity: report.Critical, Message: err.Error(),
			Context: map[string]string{"agent_id": sess.ID, "persona_slug": sess.PersonaSlug},
		})
		return httpapi.Error(ctx, h.Log, apierror.New(apierror.GuardrailsMissing, "The platform guardrails are unavailable.")), nil
	}
	persona, err := h.Registry.Persona(ctx, sess.PersonaSlug)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, Spec{
		SessionID:       sess.ID,
		Generation:      sess.Generation,
		Guardrails:      Guardrails{Content: doc.Content, Hash: doc.Hash},
		Persona:         persona,
		InitialPrompt:   sess.InitialPrompt,
		FeatureFlags:    sess.Features,
		TmuxSessionName: sess.TmuxSessionName,
	}), nil
}

// Status serves POST /sandbox/{sessionId}/status.
func (h *Handlers) Status(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in StatusReport
	if err := httpapi.DecodeJSON(req, 4096, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	change, err := changeFor(sess, in)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if in.State == session.Failed && sess.State == session.Provisioning {
		// The sandbox could not deliver the priming message (guardrails first).
		h.Reporter.Report(ctx, report.Exception{
			Source: "guardrail_injection", Severity: report.Error, Message: "sandbox failed to deliver the priming message",
			Context: map[string]string{"agent_id": sess.ID, "pane_id": sess.TmuxSessionName, "persona_slug": sess.PersonaSlug},
		})
	}
	after, err := h.Store.Transition(ctx, sess.ID, change)
	if errors.Is(err, session.ErrConflict) {
		return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "The session cannot move from %s to %s.", sess.State, in.State)), nil
	}
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, orders(after)), nil
}

func changeFor(sess session.Session, in StatusReport) (session.Change, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	c := session.Change{To: in.State, Generation: sess.Generation}
	switch in.State {
	case session.Ready:
		if len(in.GuardrailsHash) != 64 {
			return c, apierror.New(apierror.InvalidRequest, "ready needs the guardrails_hash the agent was primed with.")
		}
		c.From = []session.State{session.Provisioning}
		c.Set = map[string]any{
			"guardrails_version_hash": in.GuardrailsHash,
			"prompt_injected_at":      now,
			"ready_at":                now,
			"heartbeat_at":            now,
		}
	case session.Working, session.Idle:
		c.From = session.Running
	case session.Ended, session.Failed:
		c.From = session.Live
		c.Reason = in.Reason
		switch {
		case sess.State == session.Ending:
			c.Reason = session.ReasonShutdown
		case c.Reason == "" && in.State == session.Failed:
			c.Reason = session.ReasonError
		case c.Reason == "":
			c.Reason = session.ReasonIdle
		}
		if !slices.Contains([]session.Reason{session.ReasonShutdown, session.ReasonIdle, session.ReasonError, session.ReasonTimeout, session.ReasonCrashed, session.ReasonTokenLimit}, c.Reason) {
			return c, apierror.New(apierror.InvalidRequest, "Unknown reason %q.", in.Reason)
		}
	default:
		return c, apierror.New(apierror.InvalidRequest, "A sandbox cannot report state %q.", in.State)
	}
	return c, nil
}

// Heartbeat serves POST /sandbox/{sessionId}/heartbeat.
func (h *Handlers) Heartbeat(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	after, err := h.Store.Touch(ctx, sess.ID, sess.Generation, map[string]any{"heartbeat_at": time.Now().UTC().Format(time.RFC3339Nano)})
	if errors.Is(err, session.ErrConflict) {
		return httpapi.JSON(http.StatusOK, Orders{Stop: true, State: sess.State}), nil
	}
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, orders(after)), nil
}

// Inbox serves GET /sandbox/{sessionId}/inbox.
func (h *Handlers) Inbox(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	after, err := strconv.ParseInt(req.QueryStringParameters["after"], 10, 64)
	if err != nil || after < 0 {
		after = 0
	}
	out := orders(sess)
	out.Next = after
	evs, err := h.Store.Events(ctx, sess.ID, after, inboxPage)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	for _, e := range evs {
		out.Next = e.Seq
		if e.Type != UserMessage {
			continue
		}
		text, _ := e.Data["text"].(string)
		out.Messages = append(out.Messages, InboxMessage{Seq: e.Seq, Text: text, At: e.At})
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// EventsIn is what a sandbox appends.
type EventsIn struct {
	Events []EventIn `json:"events"`
}

// EventIn is one event a sandbox reports.
type EventIn struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data,omitempty"`
}

// EventsOut numbers the appended events.
type EventsOut struct {
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
}

var eventType = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// Events serves POST /sandbox/{sessionId}/events.
func (h *Handlers) Events(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in EventsIn
	if err := httpapi.DecodeJSON(req, session.MaxEventsPerAppend*session.MaxEventBytes, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if len(in.Events) == 0 || len(in.Events) > session.MaxEventsPerAppend {
		return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "Send 1 to %d events.", session.MaxEventsPerAppend)), nil
	}
	events := make([]session.Event, len(in.Events))
	for i, e := range in.Events {
		if len(e.Type) > session.MaxEventTypeLen || !eventType.MatchString(e.Type) {
			return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "events[%d].type must be lower-case words joined by '.' or '_'.", i)), nil
		}
		if raw, _ := json.Marshal(e.Data); len(raw) > session.MaxEventBytes {
			return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "events[%d].data is larger than %d bytes.", i, session.MaxEventBytes)), nil
		}
		events[i] = session.Event{Type: e.Type, Data: e.Data}
	}
	stored, err := h.Store.AppendEvents(ctx, sess.ID, sess.Generation, events)
	if errors.Is(err, session.ErrConflict) {
		return httpapi.Error(ctx, h.Log, apierror.New(apierror.InvalidRequest, "The session has ended.")), nil
	}
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	return httpapi.JSON(http.StatusOK, EventsOut{FirstSeq: stored[0].Seq, LastSeq: stored[len(stored)-1].Seq}), nil
}

func orders(s session.Session) Orders {
	return Orders{Stop: s.State == session.Ending || s.State.Terminal(), State: s.State}
}

// authenticate returns the session whose current sandbox holds the request's token.
func (h *Handlers) authenticate(ctx context.Context, req httpapi.Request) (session.Session, error) {
	tok := httpapi.BearerToken(req)
	if tok == "" {
		return session.Session{}, apierror.New(apierror.MissingToken, "A sandbox token is required.")
	}
	if token.Check(token.Sandbox, tok) != nil {
		if token.Check(token.Session, tok) == nil || token.Check(token.AppKey, tok) == nil {
			return session.Session{}, apierror.New(apierror.Forbidden, "Only a sandbox token is accepted here.")
		}
		return session.Session{}, apierror.New(apierror.InvalidToken, "The sandbox token is not valid.")
	}
	id := req.PathParameters["sessionId"]
	sess, err := h.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) || (err == nil && !token.Match(token.Sandbox, tok, sess.SandboxTokenHash)) {
		return session.Session{}, apierror.New(apierror.InvalidToken, "The sandbox token is not valid for this session.")
	}
	return sess, err
}
