// Package sandboxapi serves the sandbox channel, /sandbox/{sessionId}/…: the only
// way a sandbox touches platform state. Every route takes the sandbox token of that
// session's current launch, and nothing else.
//
//	GET  spec       what to run: guardrails, persona, initial prompt, flags
//	POST status     ready (with the guardrails hash used), working, idle, ended, failed
//	POST heartbeat  still alive; answers whether to stop
//	GET  inbox      what the sandbox must act on; stop once the session is ending
//	POST events     append what happened (messages, tool calls, states)
//	POST uploads    presigned URLs for the files of one gateway tool call
package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/prompts"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/s3blob"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/toolgate"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Handlers serve the sandbox channel.
type Handlers struct {
	Store      session.Store
	Registry   registry.Store
	Guardrails guardrails.Source
	Reporter   session.Reporter
	// Blob is the bucket uploads go to.
	Blob blob.Store
	Log  *slog.Logger
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
	// SessionType decides which contract tools the sandbox registers (setup-only
	// tools only in setup sessions).
	SessionType     string `json:"session_type"`
	ConfigurationID string `json:"configuration_id,omitempty"`
	// PromptMode and SystemPrompt are the mode prompt (package prompts), primed
	// right after the guardrails.
	PromptMode   prompts.Mode `json:"prompt_mode"`
	SystemPrompt string       `json:"system_prompt"`
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
	// Env holds env values users submitted since the cursor (inbox only), for the
	// sandbox's env file.
	Env  map[string]string `json:"env,omitempty"`
	Next int64             `json:"next,omitempty"`
}

// InboxMessage is a message a user sent the agent: text, files, or the answer
// to one of the agent's questions.
type InboxMessage struct {
	Seq         int64             `json:"seq"`
	Text        string            `json:"text"`
	At          string            `json:"at"`
	Answer      *session.Answer   `json:"answer,omitempty"`
	Attachments []InboxAttachment `json:"attachments,omitempty"`
}

// InboxAttachment is a file a user attached, to download within AttachmentTTL.
type InboxAttachment struct {
	Name        string `json:"name"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type,omitempty"`
	URL         string `json:"url"`
}

// AttachmentTTL is how long an inbox attachment URL works.
const AttachmentTTL = 15 * time.Minute

// UserMessage is the event type of a user's message to the agent.
const UserMessage = session.UserMessage

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
		{Method: http.MethodPost, Pattern: "/sandbox/{sessionId}/uploads", Handler: h.Uploads},
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
	pc := prompts.Context{SessionType: sess.SessionType, ClientType: sess.ClientType, Override: sess.SystemPrompt}
	if sess.ConfigurationID != "" {
		cfg, err := h.Registry.Configuration(ctx, sess.ConfigurationID)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return httpapi.Error(ctx, h.Log, err), nil
		}
		pc.HasConfiguration, pc.RepoName = err == nil, cfg.RepoName
	}
	mode, text := prompts.Select(pc)
	sessionType := sess.SessionType
	if sessionType == "" {
		sessionType = prompts.SessionCoding
	}
	return httpapi.JSON(http.StatusOK, Spec{
		SessionType:     sessionType,
		ConfigurationID: sess.ConfigurationID,
		PromptMode:      mode,
		SystemPrompt:    text,
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
	for _, e := range session.Contiguous(evs, after, time.Now()) {
		switch e.Type {
		case UserMessage:
			m, err := h.inboxMessage(ctx, sess.ID, e)
			if err != nil {
				return httpapi.JSON(http.StatusOK, out), nil // try this one again next time
			}
			out.Messages = append(out.Messages, m)
		case session.EnvSubmitted:
			values, err := h.envValues(ctx, sess.ID, e)
			if err != nil {
				// Stop before this event, so that the next read tries it again.
				return httpapi.JSON(http.StatusOK, out), nil
			}
			if out.Env == nil {
				out.Env = map[string]string{}
			}
			maps.Copy(out.Env, values)
		}
		out.Next = e.Seq
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

// inboxMessage turns a user.message event into what the sandbox acts on.
func (h *Handlers) inboxMessage(ctx context.Context, sessionID string, e session.Event) (InboxMessage, error) {
	m := InboxMessage{Seq: e.Seq, At: e.At}
	m.Text, _ = e.Data["text"].(string)
	if a, ok := e.Data["answer"].(map[string]any); ok {
		q, _ := a["question_id"].(string)
		o, _ := a["option_id"].(string)
		m.Answer = &session.Answer{QuestionID: q, OptionID: o}
	}
	atts, _ := e.Data["attachments"].([]any)
	for _, raw := range atts {
		a, _ := raw.(map[string]any)
		key, _ := a["key"].(string)
		if !strings.HasPrefix(key, session.AttachmentPrefix(sessionID)) {
			continue
		}
		u, err := h.Blob.PresignGet(ctx, key, AttachmentTTL)
		if err != nil {
			return m, err
		}
		name, _ := a["name"].(string)
		ct, _ := a["content_type"].(string)
		size, _ := a["size_bytes"].(float64) // DynamoDB numbers decode as float64
		m.Attachments = append(m.Attachments, InboxAttachment{Name: name, SizeBytes: int64(size), ContentType: ct, URL: u})
	}
	return m, nil
}

// envValues reads the values an env.submitted event refers to.
func (h *Handlers) envValues(ctx context.Context, sessionID string, e session.Event) (map[string]string, error) {
	ref, _ := e.Data["ref"].(string)
	if !strings.HasPrefix(ref, "sessions/"+sessionID+"/env/") {
		return nil, nil // not ours to read
	}
	r, _, err := h.Blob.Get(ctx, ref)
	if err != nil {
		h.Log.WarnContext(ctx, "read env values", slog.String("session_id", sessionID), slog.String("error", err.Error()))
		return nil, err
	}
	defer func() { _ = r.Close() }()
	var values map[string]string
	if err := json.NewDecoder(io.LimitReader(r, session.MaxEnvBytes)).Decode(&values); err != nil {
		h.Log.WarnContext(ctx, "decode env values", slog.String("session_id", sessionID), slog.String("error", err.Error()))
		return nil, nil // damaged: skip it rather than block the inbox
	}
	return values, nil
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

// UploadsIn asks for upload URLs for the files of one gateway tool call.
type UploadsIn struct {
	Tool       string       `json:"tool"`
	ToolCallID string       `json:"tool_call_id"`
	Files      []UploadFile `json:"files"`
}

// UploadFile is one file to upload, by its path relative to the uploaded folder.
type UploadFile struct {
	Path        string `json:"path"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type,omitempty"`
}

// UploadsOut has one presigned PUT URL per file, valid for UploadTTL.
type UploadsOut struct {
	Uploads []Upload `json:"uploads"`
}

// Upload is where one file goes.
type Upload struct {
	Path string `json:"path"`
	Key  string `json:"key"`
	URL  string `json:"url"`
}

// Limits of uploads.
const (
	UploadTTL          = 15 * time.Minute
	MaxUploadFiles     = 200
	MaxEvidenceBytes   = 100 << 20
	MaxSnapshotBytes   = 5 << 30
	maxUploadPathBytes = 500
)

// Uploads serves POST /sandbox/{sessionId}/uploads: verify's evidence files and
// save_snapshot's archive go straight to the bucket, under the call's prefix,
// where the tool's handler finds them.
func (h *Handlers) Uploads(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	sess, err := h.authenticate(ctx, req)
	if err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	var in UploadsIn
	if err := httpapi.DecodeJSON(req, 256*1024, &in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	if err := checkUploads(in); err != nil {
		return httpapi.Error(ctx, h.Log, err), nil
	}
	prefix := toolspec.UploadPrefix(sess.ID, in.Tool, in.ToolCallID)
	out := UploadsOut{Uploads: make([]Upload, 0, len(in.Files))}
	for _, f := range in.Files {
		key := prefix + f.Path
		u, err := h.Blob.PresignPut(ctx, key, f.ContentType, UploadTTL)
		if err != nil {
			return httpapi.Error(ctx, h.Log, err), nil
		}
		out.Uploads = append(out.Uploads, Upload{Path: f.Path, Key: key, URL: u})
	}
	return httpapi.JSON(http.StatusOK, out), nil
}

func checkUploads(in UploadsIn) error {
	invalid := func(format string, args ...any) error { return apierror.New(apierror.InvalidRequest, format, args...) }
	if !toolspec.ValidCallID(in.ToolCallID) {
		return invalid("tool_call_id must be 1 to %d printable ASCII characters.", toolspec.MaxCallIDLen)
	}
	if len(in.Files) == 0 || len(in.Files) > MaxUploadFiles {
		return invalid("Send 1 to %d files.", MaxUploadFiles)
	}
	switch in.Tool {
	case toolspec.Verify:
	case toolspec.SaveSnapshot:
		if len(in.Files) != 1 || in.Files[0].Path != toolgate.SnapshotObject {
			return invalid("save_snapshot uploads exactly one file, %s.", toolgate.SnapshotObject)
		}
		if in.Files[0].SizeBytes > MaxSnapshotBytes {
			return invalid("A snapshot may be at most %d bytes.", int64(MaxSnapshotBytes))
		}
	default:
		return invalid("Only verify and save_snapshot upload files.")
	}
	seen := map[string]bool{}
	for i, f := range in.Files {
		clean := path.Clean(f.Path)
		if f.Path == "" || len(f.Path) > maxUploadPathBytes || clean != f.Path || strings.HasPrefix(f.Path, "/") ||
			clean == ".." || strings.HasPrefix(clean, "../") || s3blob.ValidKey(f.Path) != nil {
			return invalid("files[%d].path must be a clean relative path of at most %d bytes.", i, maxUploadPathBytes)
		}
		if seen[f.Path] {
			return invalid("files[%d].path %q is listed twice.", i, f.Path)
		}
		seen[f.Path] = true
		if f.SizeBytes < 0 || (in.Tool == toolspec.Verify && f.SizeBytes > MaxEvidenceBytes) {
			return invalid("files[%d] must be at most %d bytes.", i, MaxEvidenceBytes)
		}
		if len(f.ContentType) > 255 {
			return invalid("files[%d].content_type is too long.", i)
		}
	}
	return nil
}

func orders(s session.Session) Orders {
	return Orders{Stop: s.State == session.Ending || s.State.Terminal(), State: s.State}
}

// authenticate returns the session whose current sandbox holds the request's token.
func (h *Handlers) authenticate(ctx context.Context, req httpapi.Request) (session.Session, error) {
	return session.AuthenticateSandbox(ctx, h.Store, req.PathParameters["sessionId"], httpapi.BearerToken(req))
}
