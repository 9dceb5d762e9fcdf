package sandboxchannel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/markdown"
	"github.com/remote-agents/remote-agents/shared/prompts"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Service is the sandbox side of sessions: what a sandbox may read and do over
// the sandbox channel (package sandboxwire), each call authenticated by the
// sandbox token of the session's current launch.
type Service struct {
	o Options
}

// Store is what the sandbox channel reads and writes of sessions: each
// method is session.Store's (package session documents their errors).
type Store interface {
	// Get reads a session; session.ErrNotFound if absent.
	Get(ctx context.Context, id string) (session.Session, error)
	// Transition applies c and returns the session as changed, or
	// session.ErrConflict.
	Transition(ctx context.Context, id string, c session.Change) (session.Session, error)
	// Touch sets fields on a live session of the given generation without
	// changing its state; session.ErrConflict otherwise.
	Touch(ctx context.Context, id string, generation int, set session.Fields) (session.Session, error)
	// RedeemBootstrap spends a launch's bootstrap code for a sandbox
	// token hash, once.
	RedeemBootstrap(ctx context.Context, id string, gen int, codeHash, sandboxTokenHash string) error
	// AppendEvents numbers events and stores them, all or nothing.
	AppendEvents(ctx context.Context, id string, generation int, events []session.Event) ([]session.Event, error)
	// Events returns up to limit events after sequence number after.
	Events(ctx context.Context, id string, after int64, limit int) ([]session.Event, error)
	session.OnceAppender
	// SetPushConnection records the push connection of a session's
	// sandbox of generation gen until expires.
	SetPushConnection(ctx context.Context, id string, gen int, connectionID string, expires time.Time) error
	// ClearPushConnection forgets connectionID.
	ClearPushConnection(ctx context.Context, connectionID string) error
	session.UploadGrants
}

// Options configure a Service.
type Options struct {
	// Store holds the sessions (session.Store); to push the stops a
	// sandbox's reports cause, pass it through session.Pushing.
	Store Store
	// Registry reads the personas and configurations specs are made of.
	Registry registry.Store
	// Guardrails are the platform guardrails every spec carries (fail
	// closed: none, no spec).
	Guardrails guardrails.Source
	// Reporter records exceptions (guardrails missing).
	Reporter session.Reporter
	// Blob keeps env values, attachments, snapshots and job uploads.
	Blob blob.Store
	// Secrets keeps the env values persisted for a configuration
	// (ConfigurationEnvKey).
	Secrets blob.Sealed
	// Limits are the platform's session limits (an agent type may lower
	// them); a zero part is no bound.
	Limits registry.SessionLimits
	// JobRuns hears the sandboxes of orchestrator jobs (sessions with a
	// JobID): their spec, and how their runs go.
	JobRuns JobRuns
	// ToolResults keeps the results of workspace tool requests
	// (workspacetool.go).
	ToolResults session.ToolResults
	// GitInsecureHosts are the hosts a workspace may clone from over plain
	// http or git, passed on in the spec; nil means loopback
	// (sandboxwire.DefaultInsecureGitHosts).
	GitInsecureHosts []string
	// Checkpoints keeps sessions' checkpoints; nil: none (the checkpoint
	// routes are 404).
	Checkpoints *checkpoint.Service
	// Jobs queues the stop of a paused session's sandbox; nil: its orders
	// alone stop it.
	Jobs session.Publisher
	// CheckpointInterval is how often an agent's sandbox checkpoints
	// between turns (the spec says it; 0: only when paused).
	CheckpointInterval time.Duration
	// Uploads bound the upload URLs a session's sandbox is granted (with its
	// attachments': session.GrantUploads); zero is no bound.
	Uploads session.UploadQuota
	Log     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns the sandbox channel's service with options o.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.GitInsecureHosts == nil {
		o.GitInsecureHosts = sandboxwire.DefaultInsecureGitHosts
	}
	return &Service{o: o}
}

// Spec is what the sandbox of session id runs: guardrails, persona, initial
// prompt, mode prompt, flags, and the env values persisted for its
// configuration. It fails closed with guardrails_missing when
// the guardrails cannot be read.
func (c *Service) Spec(ctx context.Context, id, tok string) (sandboxwire.Spec, error) {
	sess, err := session.AuthenticateSandbox(ctx, c.o.Store, id, tok)
	if err != nil {
		return sandboxwire.Spec{}, err
	}
	doc, err := guardrails.Load(ctx, c.o.Guardrails)
	if err != nil {
		session.ReportGuardrails(ctx, c.o.Reporter, report.Critical, err.Error(), map[string]string{"agent_id": sess.ID, "persona_slug": sess.PersonaSlug})
		return sandboxwire.Spec{}, apierror.New(apierror.GuardrailsMissing, "The platform guardrails are unavailable.")
	}
	// Ready will have to name exactly these guardrails. The sandbox waits
	// for the spec: its reads go on while this is written.
	served := make(chan error, 1)
	go func() {
		_, err := c.o.Store.Touch(ctx, sess.ID, sess.Generation, session.Fields{ServedGuardrailsHash: doc.Hash})
		served <- err
	}()
	spec, err := c.spec(ctx, sess, doc)
	if err := <-served; errors.Is(err, session.ErrConflict) {
		return sandboxwire.Spec{}, apierror.New(apierror.InvalidRequest, "The session has ended.")
	} else if err != nil {
		return sandboxwire.Spec{}, err
	}
	return spec, err
}

// spec reads what the spec of sess, served guardrails doc, holds.
func (c *Service) spec(ctx context.Context, sess session.Session, doc guardrails.Doc) (sandboxwire.Spec, error) {
	if sess.JobID != "" {
		return c.jobSpec(ctx, sess, doc)
	}
	var (
		persona registry.Persona
		err     error
	)
	if sess.PersonaSlug != "" { // a sandbox of the sandbox API has none
		if persona, err = c.o.Registry.Persona(ctx, sess.Tenant, sess.PersonaSlug); err != nil {
			return sandboxwire.Spec{}, err
		}
	}
	pc := prompts.Context{SessionType: sess.SessionType, ClientType: sess.ClientType, Override: sess.SystemPrompt}
	var env map[string]string
	var cfg registry.Configuration
	if sess.ConfigurationID != "" {
		cfg, err = c.o.Registry.Configuration(ctx, sess.Tenant, sess.ConfigurationID)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return sandboxwire.Spec{}, err
		}
		pc.HasConfiguration, pc.RepoName = err == nil, cfg.RepoName
		if pc.HasConfiguration && c.o.Secrets != nil {
			if env, _, err = session.ConfigurationEnv(ctx, c.o.Secrets, sess.Tenant, sess.ConfigurationID); err != nil {
				return sandboxwire.Spec{}, err
			}
		}
	}
	mode, text := prompts.Select(pc)
	var ws *sandboxwire.WorkspaceSpec
	if sess.WorkspaceDropped == "" { // else launched without it
		ws = session.WorkspaceFor(sess.Workspace, sess.TaskContext, c.o.GitInsecureHosts)
	}
	if ws != nil && pc.HasConfiguration {
		if ws.Saved, err = c.saved(ctx, cfg); err != nil {
			return sandboxwire.Spec{}, err
		}
	}
	var resume *sandboxwire.Checkpoint
	if sess.State == session.Resuming && sess.CheckpointID != "" && c.o.Checkpoints != nil {
		cp, err := c.o.Checkpoints.Get(ctx, sess.ID, sess.CheckpointID)
		if err != nil {
			return sandboxwire.Spec{}, fmt.Errorf("the checkpoint %s of %s: %w", sess.CheckpointID, sess.ID, err)
		}
		resume = &cp
		// The values users submitted before the pause: the checkpoint
		// keeps none.
		if c.o.Blob != nil {
			sub, err := session.SubmittedEnv(ctx, c.o.Blob, sess.ID)
			if err != nil {
				return sandboxwire.Spec{}, err
			}
			if len(sub) > 0 && env == nil {
				env = map[string]string{}
			}
			maps.Copy(env, sub)
		}
	}
	every := 0
	if c.o.Checkpoints != nil {
		every = int(c.o.CheckpointInterval / time.Second)
	}
	return sandboxwire.Spec{
		Resume:            resume,
		CheckpointSeconds: every,
		SessionID:         sess.ID,
		Generation:        sess.Generation,
		Guardrails:        sandboxwire.Guardrails{Content: doc.Content, Hash: doc.Hash},
		Persona:           sandboxwire.Persona{Slug: persona.Slug, Name: persona.Name, Skill: persona.Skill, Experience: persona.Experience, Active: persona.Active},
		InitialPrompt:     sess.InitialPrompt,
		FeatureFlags:      sess.Features,
		TmuxSessionName:   sess.TmuxSessionName,
		SessionType:       cmp.Or(sess.SessionType, prompts.SessionCoding),
		ConfigurationID:   sess.ConfigurationID,
		PromptMode:        string(mode),
		SystemPrompt:      text,
		Env:               env,
		Tools:             workspaceTools(sess),
		Workspace:         ws,
		ProcessEnv:        processEnv(sess),
	}, nil
}

// processEnv is the environment of the processes started through envd in
// the sandbox of sess: its envVars, for a sandbox of the sandbox API.
func processEnv(sess session.Session) map[string]string {
	if sess.Sandbox == nil {
		return nil
	}
	return sess.Sandbox.Env
}

// jobSpec is the spec of an orchestrator job's sandbox: the guardrails, and
// the job (its profile is the agent), with its profile's tools only.
func (c *Service) jobSpec(ctx context.Context, sess session.Session, doc guardrails.Doc) (sandboxwire.Spec, error) {
	if c.o.JobRuns == nil {
		return sandboxwire.Spec{}, errors.New("a job's sandbox on a channel without jobs")
	}
	js, tools, err := c.o.JobRuns.Spec(ctx, sess.JobID)
	if err != nil {
		return sandboxwire.Spec{}, err
	}
	return sandboxwire.Spec{
		SessionID:       sess.ID,
		Generation:      sess.Generation,
		Guardrails:      sandboxwire.Guardrails{Content: doc.Content, Hash: doc.Hash},
		TmuxSessionName: sess.TmuxSessionName,
		SessionType:     prompts.SessionCoding,
		Tools:           tools,
		Job:             &js,
	}, nil
}

// workspaceTools are the workspace tools the sandbox of sess registers: its
// agent type's (as stored on the session at create), none when the type has
// no workspace, and nil (every tool) for a session without a type.
func workspaceTools(sess session.Session) []string {
	switch {
	case sess.Workspace == nil:
		return nil
	case !sess.Workspace.Enabled:
		return []string{}
	default:
		return append([]string{}, sess.Workspace.Tools...)
	}
}

// Authenticate returns the session a sandbox token belongs to (see
// AuthenticateSandbox): what Report, Append and Uploads act for, checked
// before their bodies are read.
func (c *Service) Authenticate(ctx context.Context, id, tok string) (session.Session, error) {
	return session.AuthenticateSandbox(ctx, c.o.Store, id, tok)
}

// Report applies a state the sandbox of sess (see Authenticate) reports and
// returns its orders. A state the session cannot move to from where it is is
// invalid_request.
func (c *Service) Report(ctx context.Context, sess session.Session, in sandboxwire.StatusReport) (sandboxwire.Orders, error) {
	if sess.State == session.Pausing && (in.State == session.Working || in.State == session.Idle) {
		if in.State == session.Idle && in.Reason == sandboxwire.ReasonCheckpointFailed {
			// The pause's checkpoint could not be written: not paused, the
			// agent goes on.
			c.o.Log.WarnContext(ctx, "a pause's checkpoint failed: the agent goes on", slog.String("session_id", sess.ID))
			after, err := c.o.Store.Transition(ctx, sess.ID, session.Change{From: []session.State{session.Pausing}, To: session.Idle,
				Generation: sess.Generation, Reason: session.ReasonCheckpointFailed})
			if errors.Is(err, session.ErrConflict) {
				return orders(sess), nil
			}
			return orders(after), err
		}
		// Its turn stopped for the pause: the session stays pausing, and
		// the sandbox is told so.
		return orders(sess), nil
	}
	if sess.State == session.Pausing && in.State.Terminal() && sess.CheckpointID != "" {
		// A sandbox stopped in the middle of a pause's checkpoint: its last
		// committed one stands, and the agent is paused on it.
		after, err := c.o.Store.Transition(ctx, sess.ID, session.Change{From: []session.State{session.Pausing}, To: session.Paused,
			Generation: sess.Generation, Reason: session.ReasonCrashed, Set: session.Fields{PausedAt: c.o.Now()}})
		if errors.Is(err, session.ErrConflict) {
			return orders(sess), nil
		}
		return orders(after), err
	}
	change, err := changeFor(sess, in, c.o.Now())
	if err != nil {
		return sandboxwire.Orders{}, err
	}
	if change.To == session.Ready && slices.Contains(session.Running, sess.State) {
		// Ready already: this sandbox's earlier report was taken and its
		// answer lost (a 503 after the change, a timeout), and the sandbox
		// sends it again. It is answered as that one would have been.
		return orders(sess), nil
	}
	if err := c.reportJob(ctx, sess, change.To, in.Job); err != nil {
		return sandboxwire.Orders{}, err
	}
	if change.To == session.Failed && sess.State == session.Provisioning && in.Job == nil {
		// The sandbox could not deliver the priming message (guardrails
		// first); a job's sandbox says why its job failed instead.
		session.ReportGuardrails(ctx, c.o.Reporter, report.Error, "sandbox failed to deliver the priming message",
			map[string]string{"agent_id": sess.ID, "pane_id": sess.TmuxSessionName, "persona_slug": sess.PersonaSlug})
	}
	after, err := c.o.Store.Transition(ctx, sess.ID, change)
	if errors.Is(err, session.ErrConflict) && change.To == session.Ready {
		// The same report's other copy took it meanwhile.
		if now, gerr := c.o.Store.Get(ctx, sess.ID); gerr == nil && now.Generation == sess.Generation && slices.Contains(session.Running, now.State) {
			return orders(now), nil
		}
	}
	if errors.Is(err, session.ErrConflict) {
		return sandboxwire.Orders{}, apierror.New(apierror.InvalidRequest, "The session cannot move from %s to %s.", sess.State, in.State)
	}
	if err != nil {
		return sandboxwire.Orders{}, err
	}
	if change.To == session.Ready && in.Workspace != nil && len(in.Workspace.Warnings) > 0 && c.o.Reporter != nil {
		// The agent runs, in a workspace short of what its type declares
		// (set up in part, or not provisioned at all: degraded).
		c.o.Reporter.Report(ctx, report.Exception{Source: "workspace_provisioning", Severity: report.Warning, Message: "workspace provisioning " + in.Workspace.Status + ": " + strings.Join(in.Workspace.Warnings, "; "),
			Context: map[string]string{"agent_id": sess.ID, "agent_type": sess.AgentType, "persona_slug": sess.PersonaSlug}})
	}
	return orders(after), nil
}

// reportJob tells the job of a job's sandbox how its run goes, before the
// session moves (both idempotent, so a retried report does it again).
func (c *Service) reportJob(ctx context.Context, sess session.Session, to session.State, rep *sandboxwire.JobReport) error {
	if sess.JobID == "" || c.o.JobRuns == nil {
		if rep != nil {
			return apierror.New(apierror.InvalidRequest, "Only a job's sandbox reports a job.")
		}
		return nil
	}
	switch to {
	case session.Ready, session.Working, session.Idle:
		return c.o.JobRuns.Started(ctx, sess.JobID)
	case session.Ended, session.Failed:
		return c.o.JobRuns.Finished(ctx, sess.JobID, rep)
	}
	return nil
}

// changeFor is the transition a status report asks for.
func changeFor(sess session.Session, in sandboxwire.StatusReport, now time.Time) (session.Change, error) {
	to := in.State
	c := session.Change{To: to, Generation: sess.Generation}
	switch to {
	case session.Ready:
		if len(in.GuardrailsHash) != sandboxwire.GuardrailsHashLen {
			return c, apierror.New(apierror.InvalidRequest, "ready needs the guardrails_hash the agent was primed with.")
		}
		// The sandbox proves what it used: the guardrails this gateway served it.
		if in.GuardrailsHash != sess.ServedGuardrailsHash {
			return c, apierror.New(apierror.InvalidRequest, "guardrails_hash is not that of the guardrails this sandbox was served; fetch the spec and prime with it.")
		}
		c.From = session.Starting
		if err := session.CheckWorkspaceStatus(in.Workspace); err != nil {
			return c, err
		}
		c.Set = session.Fields{GuardrailsHash: in.GuardrailsHash, PromptInjectedAt: now, ReadyAt: now, HeartbeatAt: now, WorkspaceStatus: in.Workspace}
	case session.Working, session.Idle:
		c.From = session.Running
	case session.Ended, session.Failed:
		c.From = session.Live
		c.Reason = in.Reason
		switch {
		case sess.State == session.Ending:
			// The platform's reason to stop it holds (a limit's, a kill's).
			c.Reason = cmp.Or(sess.Reason, session.ReasonShutdown)
			return c, nil
		case c.Reason == "" && to == session.Failed:
			c.Reason = session.ReasonError
		case c.Reason == "":
			c.Reason = session.ReasonIdle
		}
		if !slices.Contains(sandboxwire.Reportable, c.Reason) {
			return c, apierror.New(apierror.InvalidRequest, "Unknown reason %q.", in.Reason)
		}
	default:
		return c, apierror.New(apierror.InvalidRequest, "A sandbox cannot report state %q.", in.State)
	}
	return c, nil
}

// Heartbeat records that the sandbox is alive and returns its orders: stop
// once the session is ending, ended, or launched again.
func (c *Service) Heartbeat(ctx context.Context, id, tok string, in sandboxwire.HeartbeatReport) (sandboxwire.Orders, error) {
	sess, err := session.AuthenticateSandbox(ctx, c.o.Store, id, tok)
	if err != nil {
		return sandboxwire.Orders{}, err
	}
	f := session.Fields{HeartbeatAt: c.o.Now()}
	if u := in.Usage; u != nil {
		if u.CPUPercent < 0 || u.MemoryMB < 0 || math.IsNaN(u.CPUPercent) || math.IsNaN(u.MemoryMB) || math.IsInf(u.CPUPercent, 0) || math.IsInf(u.MemoryMB, 0) ||
			u.Files < 0 || u.LogBytes < 0 || u.LogBytes > 1<<40 {
			return sandboxwire.Orders{}, apierror.New(apierror.InvalidRequest, "usage figures must be finite and not negative.")
		}
		f.Resources = u
	}
	if in.Busy {
		f.LastActivityAt = f.HeartbeatAt // the agent at work is activity
	}
	after, err := c.o.Store.Touch(ctx, sess.ID, sess.Generation, f)
	if errors.Is(err, session.ErrConflict) {
		return sandboxwire.Orders{Stop: true, State: sess.State}, nil
	}
	if err != nil {
		return sandboxwire.Orders{}, err
	}
	if after.JobID != "" && c.o.JobRuns != nil {
		// A job close to one of its limits says so to the orchestrator
		// (AGENT.JOB.ALERT); the heartbeat stands whatever happens to it.
		if err := c.o.JobRuns.Alert(ctx, after.JobID, after); err != nil {
			c.o.Log.WarnContext(ctx, "publish the job's alerts", slog.String("job_id", after.JobID), slog.String("error", err.Error()))
		}
	}
	// A session over one of its limits is told to stop now.
	return orders(c.endForLimit(ctx, after)), nil
}

// Inbox returns what the sandbox must act on after the cursor: user messages
// (attachments as download URLs), env values and workspace tool requests. It stops before an event it
// cannot project yet, so that the next read tries it again.
func (c *Service) Inbox(ctx context.Context, id, tok string, after int64) (sandboxwire.Orders, error) {
	sess, err := session.AuthenticateSandbox(ctx, c.o.Store, id, tok)
	if err != nil {
		return sandboxwire.Orders{}, err
	}
	out := orders(sess)
	out.Next = max(after, 0)
	evs, err := c.o.Store.Events(ctx, sess.ID, out.Next, sandboxwire.InboxPage)
	if err != nil {
		return sandboxwire.Orders{}, err
	}
	for _, e := range session.Contiguous(evs, out.Next, c.o.Now()) {
		switch e.Type {
		case sandboxwire.TypeUserMessage:
			m, err := c.inboxMessage(ctx, sess.ID, e)
			if err != nil {
				return out, nil
			}
			out.Messages = append(out.Messages, m)
		case sandboxwire.TypeEnvSubmitted:
			values, err := c.envValues(ctx, sess.ID, e)
			if err != nil {
				return out, nil
			}
			if out.Env == nil {
				out.Env = map[string]string{}
			}
			maps.Copy(out.Env, values)
		case sandboxwire.TypeWorkspaceToolRequest:
			req, ok, err := c.workspaceToolRequest(ctx, sess.ID, e)
			if err != nil {
				return out, nil
			}
			if ok {
				out.ToolRequests = append(out.ToolRequests, req)
			}
		}
		out.Next = e.Seq
	}
	return out, nil
}

// inboxMessage turns a user.message event into what the sandbox acts on.
func (c *Service) inboxMessage(ctx context.Context, sessionID string, e session.Event) (sandboxwire.InboxMessage, error) {
	m := sandboxwire.InboxMessage{Seq: e.Seq, At: e.At.UTC().Format(time.RFC3339Nano)}
	var in sandboxwire.UserMessage
	if err := sandboxwire.Decode(e.Data, &in); err != nil {
		c.o.Log.WarnContext(ctx, "damaged user message", slog.String("session_id", sessionID), slog.Int64("seq", e.Seq), slog.String("error", err.Error()))
		return m, nil // damaged: pass it by rather than block the inbox
	}
	m.Text, m.Answer, m.Interrupt = in.Text, in.Answer, in.Interrupt
	for _, a := range in.Attachments {
		if !strings.HasPrefix(a.Key, session.AttachmentPrefix(sessionID)) {
			continue
		}
		u, err := c.o.Blob.PresignGet(ctx, a.Key, sandboxwire.AttachmentTTL)
		if err != nil {
			return m, err
		}
		m.Attachments = append(m.Attachments, sandboxwire.InboxAttachment{Name: a.Name, SizeBytes: a.SizeBytes, ContentType: a.ContentType, URL: u})
	}
	return m, nil
}

// envValues reads the values an env.submitted event refers to.
func (c *Service) envValues(ctx context.Context, sessionID string, e session.Event) (map[string]string, error) {
	var in sandboxwire.EnvSubmitted
	if err := sandboxwire.Decode(e.Data, &in); err != nil || !strings.HasPrefix(in.Ref, session.EnvPrefix(sessionID)) {
		return nil, nil // not ours to read
	}
	r, _, err := c.o.Blob.Get(ctx, in.Ref)
	if err != nil {
		c.o.Log.WarnContext(ctx, "read env values", slog.String("session_id", sessionID), slog.String("error", err.Error()))
		return nil, err
	}
	defer func() { _ = r.Close() }()
	var values map[string]string
	if err := json.NewDecoder(io.LimitReader(r, sandboxwire.MaxEnvBytes)).Decode(&values); err != nil {
		c.o.Log.WarnContext(ctx, "decode env values", slog.String("session_id", sessionID), slog.String("error", err.Error()))
		return nil, nil // damaged: skip it rather than block the inbox
	}
	return values, nil
}

// Append appends the events of the sandbox of sess (see Authenticate) to its
// session and returns their sequence numbers. Only the types a sandbox may
// send (sandboxwire.SandboxTypes) are accepted: a sandbox cannot forge a
// user's message or env submission, nor an output the platform records.
func (c *Service) Append(ctx context.Context, sess session.Session, in sandboxwire.EventsRequest) (sandboxwire.EventsResponse, error) {
	if len(in.Events) == 0 || len(in.Events) > sandboxwire.MaxEventsPerAppend {
		return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "Send 1 to %d events.", sandboxwire.MaxEventsPerAppend)
	}
	events := make([]session.Event, len(in.Events))
	for i, e := range in.Events {
		if !sandboxwire.ValidEventType(e.Type) {
			return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "events[%d].type must be lower-case words joined by '.' or '_'.", i)
		}
		if !sandboxwire.SandboxMaySend(e.Type) {
			return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "events[%d].type %s is not one a sandbox may send (%s).", i, e.Type, strings.Join(sandboxwire.SandboxTypes, ", "))
		}
		if len(e.Data) > sandboxwire.MaxEventBytes {
			return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "events[%d].data is larger than %d bytes.", i, sandboxwire.MaxEventBytes)
		}
		var data map[string]any
		if len(e.Data) > 0 {
			dec := json.NewDecoder(bytes.NewReader(e.Data))
			dec.UseNumber() // numbers are checked as written, then stored as float64
			if err := dec.Decode(&data); err != nil {
				return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "events[%d].data must be a JSON object.", i)
			}
			if err := storable(data, 1); err != nil {
				return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "events[%d].data: %s", i, err.Error())
			}
		}
		events[i] = session.Event{Type: e.Type, Data: data}
		// An agent message is rendered once, here, for every viewer of
		// every stream (the text is the sandbox's; the HTML the platform's).
		if s, ok := data["text"].(string); ok && s != "" && e.Type == sandboxwire.TypeAgentMessage {
			if h := markdown.HTML(s); len(h) <= session.MaxEventHTMLBytes {
				events[i].HTML = h
			}
		}
	}
	if in.ID != "" {
		return c.appendOnce(ctx, sess, in.ID, events)
	}
	stored, err := c.o.Store.AppendEvents(ctx, sess.ID, sess.Generation, events)
	if errors.Is(err, session.ErrConflict) {
		return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "The session has ended.")
	}
	if err != nil {
		return sandboxwire.EventsResponse{}, err
	}
	return sandboxwire.EventsResponse{FirstSeq: stored[0].Seq, LastSeq: stored[len(stored)-1].Seq}, nil
}

// eventRetention is how long an append's ID is remembered: far longer than a
// sandbox retries.
const eventRetention = 24 * time.Hour

// appendOnce appends the events of an append with an ID, all of them once.
func (c *Service) appendOnce(ctx context.Context, sess session.Session, appendID string, events []session.Event) (sandboxwire.EventsResponse, error) {
	if len(appendID) > sandboxwire.MaxAppendIDLen || !session.Printable.MatchString(appendID) {
		return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "An append's id is 1 to %d printable ASCII characters.", sandboxwire.MaxAppendIDLen)
	}
	now := c.o.Now().UTC()
	// One event is hashed alone, as before batches had ids.
	hash := session.HashOf(events)
	if len(events) == 1 {
		hash = session.HashOf(events[0])
	}
	rec := session.IdempotencyRecord{
		Key:         session.ScopedKey("event", sess.ID, appendID),
		SessionID:   sess.ID,
		RequestHash: hash,
		CreatedAt:   now,
		ExpiresAt:   now.Add(eventRetention).Unix(),
	}
	got, replayed, err := session.AppendOnce(ctx, c.o.Store, sess.ID, sess.Generation, events, rec)
	switch {
	case errors.Is(err, session.ErrConflict):
		return sandboxwire.EventsResponse{}, apierror.New(apierror.InvalidRequest, "The session has ended.")
	case err != nil:
		return sandboxwire.EventsResponse{}, err
	case replayed && got.RequestHash != rec.RequestHash:
		return sandboxwire.EventsResponse{}, apierror.New(apierror.IdempotencyKeyReused, "This append id was used for different events.")
	}
	// The record keeps the last number; the same events were numbered
	// consecutively before it.
	return sandboxwire.EventsResponse{FirstSeq: got.Seq - int64(len(events)) + 1, LastSeq: got.Seq}, nil
}

// Uploads returns presigned PUT URLs for the files of one gateway tool call:
// verify's evidence files and save_snapshot's archive go straight to the
// bucket, under the call's prefix, where the tool's effect finds them.
func (c *Service) Uploads(ctx context.Context, sess session.Session, in sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error) {
	if in.Tool == sandboxwire.JobUploads {
		return c.jobUploads(ctx, sess, in)
	}
	if err := checkUploads(in); err != nil {
		return sandboxwire.UploadsResponse{}, err
	}
	if err := c.grant(ctx, sess, in.Files); err != nil {
		return sandboxwire.UploadsResponse{}, err
	}
	prefix := toolspec.UploadPrefix(sess.ID, in.Tool, in.ToolCallID)
	out := sandboxwire.UploadsResponse{Uploads: make([]sandboxwire.Upload, 0, len(in.Files))}
	for _, f := range in.Files {
		key := prefix + f.Path
		u, err := c.o.Blob.PresignPut(ctx, key, cmp.Or(f.ContentType, session.DefaultContentType), f.SizeBytes, sandboxwire.UploadTTL)
		if err != nil {
			return sandboxwire.UploadsResponse{}, err
		}
		out.Uploads = append(out.Uploads, sandboxwire.Upload{Path: f.Path, Key: key, URL: u.URL, Headers: u.Headers})
	}
	return out, nil
}

// grant counts files against the session's upload quota before they are
// signed.
func (c *Service) grant(ctx context.Context, sess session.Session, files []sandboxwire.UploadFile) error {
	var bytes int64
	for _, f := range files {
		bytes += f.SizeBytes
	}
	return session.GrantUploads(ctx, c.o.Store, c.o.Uploads, sess, len(files), bytes)
}

func checkUploads(in sandboxwire.UploadsRequest) error {
	invalid := func(format string, args ...any) error { return apierror.New(apierror.InvalidRequest, format, args...) }
	if !toolspec.ValidCallID(in.ToolCallID) {
		return invalid("tool_call_id must be 1 to %d printable ASCII characters.", toolspec.MaxCallIDLen)
	}
	if len(in.Files) == 0 || len(in.Files) > sandboxwire.MaxUploadFiles {
		return invalid("Send 1 to %d files.", sandboxwire.MaxUploadFiles)
	}
	switch in.Tool {
	case toolspec.Verify:
	case toolspec.SaveSnapshot:
		if len(in.Files) != 1 || in.Files[0].Path != sandboxwire.SnapshotObject {
			return invalid("save_snapshot uploads exactly one file, %s.", sandboxwire.SnapshotObject)
		}
		if in.Files[0].SizeBytes > sandboxwire.MaxSnapshotBytes {
			return invalid("A snapshot may be at most %d bytes.", int64(sandboxwire.MaxSnapshotBytes))
		}
	default:
		return invalid("Only verify and save_snapshot upload files.")
	}
	seen := map[string]bool{}
	for i, f := range in.Files {
		if !sandboxwire.ValidUploadPath(f.Path) {
			return invalid("files[%d].path must be a clean relative path of at most %d bytes.", i, sandboxwire.MaxUploadPathBytes)
		}
		if seen[f.Path] {
			return invalid("files[%d].path %q is listed twice.", i, f.Path)
		}
		seen[f.Path] = true
		if f.SizeBytes < 0 || (in.Tool == toolspec.Verify && f.SizeBytes > sandboxwire.MaxEvidenceBytes) {
			return invalid("files[%d] must be at most %d bytes.", i, sandboxwire.MaxEvidenceBytes)
		}
		if f.ContentType != "" && !session.ValidContentType(f.ContentType) {
			return invalid("files[%d].content_type must be a media type such as text/plain, of at most %d bytes.", i, sandboxwire.MaxContentTypeBytes)
		}
	}
	return nil
}

// orders tells a sandbox to stop once its session is ending or over.
// orders are what s's sandbox is told: its state (pausing: write a
// checkpoint for the pause), and to stop once it is ending, paused or over.
func orders(s session.Session) sandboxwire.Orders {
	return sandboxwire.Orders{Stop: s.State == session.Ending || s.State == session.Paused || s.State.Terminal(), State: s.State, Viewers: len(s.Viewers), ViewerEpoch: s.ViewerEpoch}
}

// Bounds of event data the store can keep: DynamoDB nests at most 32 levels
// (the item and its data take two), has no empty attribute names, and keeps
// numbers of up to 38 digits between 1e-130 and 1e126.
const (
	maxDataDepth  = 16
	maxNumDigits  = 38
	maxNumExp10   = 126
	minNumExp10   = -130
	maxDataKeyLen = 255
)

// storable refuses event data the store could not keep, so that it is a 400
// and not a failed write, and turns its numbers (decoded as json.Number) into
// the float64 the store encodes, in place.
func storable(v any, depth int) error {
	if depth > maxDataDepth {
		return fmt.Errorf("nested deeper than %d levels", maxDataDepth)
	}
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) { // in order: the same data, the same error
			e := t[k]
			if k == "" || len(k) > maxDataKeyLen {
				return fmt.Errorf("a key must be 1 to %d bytes", maxDataKeyLen)
			}
			if err := storable(e, depth+1); err != nil {
				return err
			}
			if n, ok := e.(json.Number); ok {
				t[k], _ = n.Float64()
			}
		}
	case []any:
		for i, e := range t {
			if err := storable(e, depth+1); err != nil {
				return err
			}
			if n, ok := e.(json.Number); ok {
				t[i], _ = n.Float64()
			}
		}
	case json.Number:
		if !storableNumber(string(t)) {
			return fmt.Errorf("the number %.40s is out of range (at most %d digits, magnitude 1e%d to 1e%d)", t, maxNumDigits, minNumExp10, maxNumExp10)
		}
	}
	return nil
}

// storableNumber reports whether a JSON number has at most maxNumDigits
// significant digits and, unless zero, a magnitude in [1e-130, 1e126).
func storableNumber(n string) bool {
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	e := 0
	if exp != "" {
		v, err := strconv.Atoi(exp)
		if err != nil || v > 1000 || v < -1000 {
			return false
		}
		e = v
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return true // zero
	}
	// The first significant digit's power of ten.
	lead := e + len(strings.TrimLeft(whole, "0")) - 1
	if strings.TrimLeft(whole, "0") == "" {
		lead = e - (len(frac) - len(strings.TrimLeft(frac, "0"))) - 1
	}
	sig := strings.TrimRight(digits, "0")
	return len(sig) <= maxNumDigits && lead < maxNumExp10 && lead >= minNumExp10
}
