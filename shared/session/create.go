package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/appkey"
	"github.com/remote-agents/remote-agents/shared/checkpoint"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/report"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/token"
)

// Limits on create's input.
const (
	MaxNameLen           = 128
	MaxPromptBytes       = 32 * 1024
	MaxIdempotencyKeyLen = 255
	// IdempotencyRetention is how long a create's Idempotency-Key maps to its session.
	IdempotencyRetention = 24 * time.Hour
	// StopGrace is how long a sandbox has to stop by itself after a shutdown
	// before session.stop stops it for good.
	StopGrace = 10 * time.Second
)

var (
	slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	// Printable is what idempotency keys and client message and append
	// ids may be made of: printable ASCII, no space.
	Printable = regexp.MustCompile(`^[\x21-\x7e]+$`)
	sessionID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// Publisher sends jobs-queue messages.
type Publisher interface {
	Publish(ctx context.Context, m jobqueue.Message, delay time.Duration) error
}

// Reporter records exceptions.
type Reporter interface {
	Report(ctx context.Context, e report.Exception)
}

// AgentTypes resolves the agent type a new session is of (agenttype.Service).
type AgentTypes interface {
	// Resolve returns type id of tenant with the workspace its sessions
	// start with; agent_type_not_found for an unknown type or another
	// tenant's.
	Resolve(ctx context.Context, tenant, id string) (registry.AgentType, error)
}

// CreatorOptions configure a Creator.
type CreatorOptions struct {
	Store Store
	// Quotas bound what one app (tenant) may hold or open; a zero part is
	// no bound.
	Quotas   Quotas
	Registry registry.Store
	// AgentTypes resolves the agent type of a create.
	AgentTypes AgentTypes
	Guardrails guardrails.Source
	Jobs       Publisher
	Reporter   Reporter
	Log        *slog.Logger
	// CreationTimeout bounds how long Create waits for ready.
	CreationTimeout time.Duration
	// Checkpoints keeps agents' checkpoints, which a fork copies (nil: no
	// forks).
	Checkpoints *checkpoint.Service
	// PublicBaseURL prefixes embed URLs, e.g. https://agents.example.com.
	PublicBaseURL string
	// DefaultFeatures are enabled for every session, on top of the request's.
	DefaultFeatures Features
	// GitInsecureHosts are the hosts a task context's repository may be
	// cloned from over plain http or git (config git_insecure_hosts); nil
	// means loopback (sandboxwire.DefaultInsecureGitHosts).
	GitInsecureHosts []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Creator serves the create route: it authenticates apps and makes sessions.
type Creator struct {
	o CreatorOptions
}

// NewCreator returns a creator with options o.
func NewCreator(o CreatorOptions) *Creator {
	o.Now, o.Log = clock(o.Now), logger(o.Log)
	if o.GitInsecureHosts == nil {
		o.GitInsecureHosts = sandboxwire.DefaultInsecureGitHosts
	}
	return &Creator{o: o}
}

// clock is now, or time.Now when nil.
func clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// logger is log, or slog.Default() when nil.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.Default()
	}
	return log
}

// CreateRequest is what an app asks for.
type CreateRequest struct {
	ProjectName   string    `json:"project_name"`
	PersonaSlug   string    `json:"persona_slug"`
	InitialPrompt string    `json:"initial_prompt"`
	FeatureFlags  *Features `json:"feature_flags,omitempty"`
	// SessionType is "coding" (the default) or "setup"; a setup session needs a
	// configuration and is the only kind that gets the setup-only tools.
	SessionType string `json:"session_type,omitempty"`
	// ClientType "automation" makes the session an automation run.
	ClientType string `json:"client_type,omitempty"`
	// ConfigurationID names the repository configuration to work in; without
	// one the session is a scratch session.
	ConfigurationID string `json:"configuration_id,omitempty"`
	// SystemPrompt, if set, replaces the mode prompt (never the guardrails).
	SystemPrompt string `json:"system_prompt,omitempty"`
	// AgentType, if set, is the session's agent type instead of its
	// persona's.
	AgentType string `json:"agent_type,omitempty"`
	// TaskContext is the task the session is for: the repository and branch
	// its workspace clones (if its type's repo_source is task_context), and
	// workspace metadata for the agent.
	TaskContext *sandboxwire.TaskContext `json:"task_context,omitempty"`
	// EndUser, if set, is the app's user the agent works for: a secret its
	// type names is that user's where the app registered one for them
	// (package secrets), the app's own otherwise.
	EndUser        string `json:"end_user,omitempty"`
	IdempotencyKey string `json:"-"`
	// sandbox, endsIn and offline are a sandbox API create's
	// (CreateSandbox): what the sandbox is created with, how long it runs,
	// and whether it may reach the internet.
	sandbox *SandboxOptions
	endsIn  time.Duration
	offline bool
}

// Created is a ready session and a token for it.
type Created struct {
	AgentID           string   `json:"agent_id"`
	EmbedURL          string   `json:"embed_url"`
	SessionToken      string   `json:"session_token"`
	ProjectName       string   `json:"project_name"`
	PersonaSlug       string   `json:"persona_slug"`
	TmuxSessionName   string   `json:"tmux_session_name"`
	Status            State    `json:"status"`
	GuardrailsVersion string   `json:"guardrails_version"`
	FeatureFlags      Features `json:"feature_flags"`
	// Workspace is how the agent's workspace was provisioned: ready,
	// degraded (with warnings) or none.
	Workspace sandboxwire.WorkspaceStatus `json:"workspace"`
}

// Authenticate returns the app key a bearer secret belongs to (appkey).
func (s *Creator) Authenticate(ctx context.Context, secret string) (registry.AppKey, error) {
	return appkey.New(s.o.Registry).Authenticate(ctx, secret)
}

// Create makes a session and waits until it is ready or the creation timeout passes.
func (s *Creator) Create(ctx context.Context, app registry.AppKey, req CreateRequest) (Created, error) {
	if err := validateCreate(req); err != nil {
		return Created{}, err
	}
	if err := checkTaskContext(req.TaskContext, s.o.GitInsecureHosts); err != nil {
		return Created{}, err
	}
	// Fail closed on guardrails before anything else exists.
	doc, err := guardrails.Load(ctx, s.o.Guardrails)
	if err != nil {
		ReportGuardrails(ctx, s.o.Reporter, report.Critical, err.Error(), map[string]string{"agent_id": "", "persona_slug": req.PersonaSlug, "project_name": req.ProjectName})
		return Created{}, apierror.New(apierror.GuardrailsMissing, "Agents cannot be created: the platform guardrails are unavailable.")
	}
	// The app's tenant's items, and the platform's: another tenant's are not
	// found, exactly like items nobody registered. The project, the persona
	// and a type the request names are read at once (a create waits for each
	// round trip), and their errors answered in that order.
	var (
		wg                              sync.WaitGroup
		persona                         registry.Persona
		typ                             *registry.AgentType
		projectErr, personaErr, typeErr error
	)
	wg.Go(func() { _, projectErr = s.o.Registry.Project(ctx, app.Tenant, req.ProjectName) })
	wg.Go(func() { persona, personaErr = s.o.Registry.Persona(ctx, app.Tenant, req.PersonaSlug) })
	if req.AgentType != "" {
		wg.Go(func() { typ, typeErr = s.agentType(ctx, app, req.AgentType, registry.Persona{}) })
	}
	wg.Wait()
	if projectErr != nil {
		if errors.Is(projectErr, registry.ErrNotFound) {
			return Created{}, apierror.New(apierror.ProjectNotFound, "No project is registered as %q.", req.ProjectName)
		}
		return Created{}, projectErr
	}
	if errors.Is(personaErr, registry.ErrNotFound) || (personaErr == nil && !persona.Active) {
		return Created{}, apierror.New(apierror.PersonaNotFound, "No active persona has the slug %q.", req.PersonaSlug)
	}
	if personaErr != nil {
		return Created{}, personaErr
	}
	if req.AgentType == "" {
		typ, typeErr = s.agentType(ctx, app, "", persona)
	}
	if typeErr != nil {
		return Created{}, typeErr
	}
	if req.ConfigurationID != "" {
		cfg, err := s.o.Registry.Configuration(ctx, app.Tenant, req.ConfigurationID)
		if errors.Is(err, registry.ErrNotFound) {
			return Created{}, apierror.New(apierror.NotFound, "No configuration has the id %q.", req.ConfigurationID)
		}
		if err != nil {
			return Created{}, err
		}
		if req.SessionType == "setup" && cfg.Tenant != app.Tenant {
			// A platform configuration is read by every tenant, changed by none.
			return Created{}, apierror.New(apierror.Forbidden, "Configuration %q is the platform's: a setup session can only change its own app's configurations.", req.ConfigurationID)
		}
	}

	sess, plain, err := s.startOrResume(ctx, app, req, doc, typ)
	if err != nil {
		return Created{}, err
	}
	ready, err := s.waitReady(ctx, sess.ID)
	if errors.Is(err, errNotReady) {
		return Created{}, s.timedOut(ctx, app, req, sess)
	}
	if err != nil {
		return Created{}, err
	}
	if !ready.ClaimBy.IsZero() && ready.ClaimedAt.IsZero() {
		// An agent whose create timed out is handed out now: it is no
		// longer unclaimed.
		if _, err := s.o.Store.Touch(ctx, ready.ID, ready.Generation, Fields{ClaimedAt: s.o.Now().UTC()}); err != nil && !errors.Is(err, ErrConflict) {
			return Created{}, err
		}
	}
	return s.created(ready, plain), nil
}

// created is what a create (or a fork) answers for ready, whose token is
// plain.
func (s *Creator) created(ready Session, plain string) Created {
	return Created{
		AgentID:           ready.ID,
		EmbedURL:          s.embedURL(ready.ID, plain),
		SessionToken:      plain,
		ProjectName:       ready.ProjectName,
		PersonaSlug:       ready.PersonaSlug,
		TmuxSessionName:   ready.TmuxSessionName,
		Status:            Ready,
		GuardrailsVersion: ready.GuardrailsHash,
		FeatureFlags:      ready.Features,
		Workspace:         workspaceStatus(ready),
	}
}

// agentType is the agent type a new session is of: the request's, else the
// persona's; nil when neither names one (no workspace).
func (s *Creator) agentType(ctx context.Context, app registry.AppKey, requested string, persona registry.Persona) (*registry.AgentType, error) {
	id := persona.AgentType
	if requested != "" {
		id = requested
	}
	if id == "" {
		return nil, nil
	}
	if s.o.AgentTypes == nil {
		return nil, errors.New("create: no agent type service")
	}
	t, err := s.o.AgentTypes.Resolve(ctx, app.Tenant, id)
	if err != nil {
		return nil, fmt.Errorf("agent type of the new session: %w", err)
	}
	return &t, nil
}

// startOrResume writes a new session and enqueues its start, or, for a repeated
// Idempotency-Key, returns the session that key created with a new token for it.
// A new session copies typ's workspace configuration: a later change of the
// type is not its.
func (s *Creator) startOrResume(ctx context.Context, app registry.AppKey, req CreateRequest, doc guardrails.Doc, typ *registry.AgentType) (Session, string, error) {
	now := s.o.Now().UTC()
	var rec *IdempotencyRecord
	if req.IdempotencyKey != "" {
		rec = &IdempotencyRecord{
			Key:         idempotencyRecordKey(app, req.IdempotencyKey),
			RequestHash: HashOf(req),
			CreatedAt:   now,
			ExpiresAt:   now.Add(IdempotencyRetention).Unix(),
		}
		if sess, plain, found, err := s.resume(ctx, rec); found || err != nil {
			return sess, plain, err
		}
	}
	if err := s.checkBudget(ctx, app, now); err != nil {
		return Session{}, "", err
	}
	id := newID()
	plain, hash := token.New(token.Session)
	features := s.o.DefaultFeatures
	if req.FeatureFlags != nil {
		features = or(features, *req.FeatureFlags)
	}
	sess := Session{
		ID: id,
		Blueprint: Blueprint{
			ProjectName:     req.ProjectName,
			PersonaSlug:     req.PersonaSlug,
			InitialPrompt:   req.InitialPrompt,
			Features:        features,
			AppLimits:       app.Limits,
			AppCaps:         app.Caps(),
			SessionType:     req.SessionType,
			ClientType:      req.ClientType,
			ConfigurationID: req.ConfigurationID,
			SystemPrompt:    req.SystemPrompt,
			TaskContext:     req.TaskContext,
			EndUser:         req.EndUser,
			GuardrailsHash:  doc.Hash,
			TmuxSessionName: "ra-" + id[:8],
		},
		AppKeyID:    app.ID,
		Tenant:      app.Tenant,
		DueAt:       now.Add(ProvisioningLimit),
		State:       Provisioning,
		Generation:  1,
		TokenHashes: []string{hash},
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	if typ != nil {
		sess.AgentType, sess.Workspace, sess.AgentTypeOwner = typ.ID, &typ.Workspace, typ.Tenant
		sess.Egress = EgressFor(&typ.Workspace, req.TaskContext)
	}
	if req.sandbox != nil {
		sess.Sandbox, sess.EndsAt = req.sandbox, now.Add(req.endsIn)
		if req.offline {
			sess.Egress = &egress.Policy{Mode: egress.ModeNone, Allow: []string{}}
		}
	}
	if rec != nil {
		rec.SessionID = id
	}
	adm := s.admission(now)
	err := s.o.Store.Admit(ctx, sess, rec, adm)
	if q := s.overQuota(err, adm, now); q != nil {
		s.quotaExceeded(ctx, app.Tenant, q, now)
		return Session{}, "", q
	}
	if errors.Is(err, ErrIdempotencyTaken) {
		// A concurrent create with the same key won: wait on its session.
		sess, plain, _, err := s.resume(ctx, rec)
		return sess, plain, err
	}
	if err != nil {
		return Session{}, "", err
	}
	if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: id, Generation: 1}, 0); err != nil {
		s.o.Log.WarnContext(ctx, "publish session.start", slog.String("session_id", id), slog.String("error", err.Error()))
		if rec == nil {
			// Nothing can come back to this session: a retry starts another.
			s.fail(ctx, id, 1, ReasonError)
		}
		// With an Idempotency-Key the session stays provisioning, and a retry
		// with the same key queues its start again (see resume).
		return Session{}, "", &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent could not be started; try again.", RetryAfter: apierror.UnavailableRetryAfter}
	}
	if !sess.EndsAt.IsZero() {
		if m, delay := expire(sess, now); s.o.Jobs.Publish(ctx, m, delay) != nil {
			// Unqueued, its end would not come: no sandbox then.
			s.o.Log.WarnContext(ctx, "publish session.expire: the sandbox is not started", slog.String("session_id", id))
			s.fail(ctx, id, 1, ReasonError)
			return Session{}, "", &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The sandbox could not be started; try again.", RetryAfter: apierror.UnavailableRetryAfter}
		}
	}
	return sess, plain, nil
}

// resume returns the session an idempotency record points at, with a new token.
func (s *Creator) resume(ctx context.Context, rec *IdempotencyRecord) (Session, string, bool, error) {
	prev, err := s.o.Store.Idempotency(ctx, rec.Key)
	if errors.Is(err, ErrNotFound) {
		return Session{}, "", false, nil
	}
	if err != nil {
		return Session{}, "", false, err
	}
	if prev.RequestHash != rec.RequestHash {
		return Session{}, "", true, apierror.New(apierror.IdempotencyKeyReused, "This Idempotency-Key was used for a different request.")
	}
	sess, err := s.o.Store.Get(ctx, prev.SessionID)
	if err != nil {
		return Session{}, "", true, err
	}
	if sess.State.Terminal() || sess.State == Ending {
		// Permanent: retrying the same request cannot help (not retryable).
		return Session{}, "", true, apierror.New(apierror.IdempotencyKeyReused, "The agent created with this Idempotency-Key has ended; create a new agent with a new Idempotency-Key.")
	}
	if sess.State == Provisioning {
		// The first attempt may have died, or failed to queue its start; start is
		// idempotent per session and generation, so asking again is safe. It is
		// asked before a token is spent on this attempt.
		if err := s.o.Jobs.Publish(ctx, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: sess.ID, Generation: sess.Generation}, 0); err != nil {
			s.o.Log.WarnContext(ctx, "re-publish session.start", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
			return Session{}, "", true, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The agent could not be started; try again.", RetryAfter: apierror.UnavailableRetryAfter}
		}
	}
	plain, hash := token.New(token.Session)
	if err := s.o.Store.AddToken(ctx, sess.ID, hash); err != nil {
		if errors.Is(err, ErrConflict) {
			return Session{}, "", true, apierror.New(apierror.IdempotencyKeyReused, "This Idempotency-Key has handed out %d session tokens, the most one agent holds; use one of those, or a new Idempotency-Key for a new agent.", MaxTokens)
		}
		return Session{}, "", true, err
	}
	return sess, plain, true, nil
}

// errNotReady is waitReady's: the creation timeout passed first.
var errNotReady = errors.New("not ready within the creation timeout")

// timedOut answers a create whose agent was not ready within the creation
// timeout (408 agent_creation_timeout): the agent goes on starting, and the
// answer says how to take it up: the create again with its Idempotency-Key
// (the one the platform assigns, when the request had none), within
// UnclaimedLimit, after which an agent nobody took up ends (unclaimed).
func (s *Creator) timedOut(ctx context.Context, app registry.AppKey, req CreateRequest, sess Session) error {
	now := s.o.Now().UTC()
	key := req.IdempotencyKey
	if key == "" {
		key = "ra-" + newID()
		rec := IdempotencyRecord{Key: idempotencyRecordKey(app, key), SessionID: sess.ID, RequestHash: HashOf(req), CreatedAt: now, ExpiresAt: now.Add(IdempotencyRetention).Unix()}
		if err := s.o.Store.Remember(ctx, rec); err != nil {
			return err
		}
	}
	if _, err := s.o.Store.Touch(ctx, sess.ID, sess.Generation, Fields{ClaimBy: now.Add(UnclaimedLimit)}); err != nil && !errors.Is(err, ErrConflict) {
		s.o.Log.WarnContext(ctx, "mark an agent whose create timed out", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
	// The agent id says which agent a retry keeps waiting on (one still
	// provisioning its workspace, say), the key how to.
	return &apierror.Error{
		Code: apierror.AgentCreationTimeout,
		Message: fmt.Sprintf("The agent was not ready within %s; send the create again with Idempotency-Key %s to keep waiting for it (it ends unless that happens within %s).",
			s.o.CreationTimeout, key, UnclaimedLimit),
		RetryAfter: 1,
		Details:    map[string]any{"agent_id": sess.ID, "idempotency_key": key},
	}
}

// waitReady polls the session until it is running, has failed, or the creation
// timeout passes.
func (s *Creator) waitReady(ctx context.Context, id string) (Session, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.CreationTimeout)
	defer cancel()
	// Tight at first (a warm sandbox is ready within tens of milliseconds),
	// then backing off: a cold one takes seconds.
	delay, polls := 5*time.Millisecond, 0
	for {
		sess, err := s.o.Store.Get(ctx, id)
		switch {
		case err != nil && ctx.Err() == nil:
			return Session{}, err
		case err == nil && (slices.Contains(Running, sess.State) || !sess.ReadyAt.IsZero()):
			// Ready, or ready once and already moved on (a one-turn agent ending).
			return sess, nil
		case err == nil && sess.Reason == ReasonModelUnavailable:
			return Session{}, apierror.New(apierror.ModelUnavailable, "The agent has no usable model: the platform's model settings (RA_LLM_PROVIDER and its key) need fixing.")
		case err == nil && sess.Reason == ReasonLaunchFailed:
			return Session{}, &apierror.Error{Code: apierror.ServiceUnavailable, RetryAfter: apierror.UnavailableRetryAfter,
				Message: "The agent's sandbox could not be launched, neither on its capacity nor on the fallback capacity; try again later."}
		case err == nil && (sess.State.Terminal() || sess.State == Ending):
			return Session{}, apierror.New(apierror.ServiceUnavailable, "The agent failed to start; try again.")
		}
		select {
		case <-ctx.Done():
			return Session{}, errNotReady
		case <-time.After(delay):
		}
		if polls++; polls > 30 {
			delay = min(delay*2, 200*time.Millisecond)
		}
	}
}

func (s *Creator) fail(ctx context.Context, id string, gen int, reason Reason) {
	if _, err := s.o.Store.Transition(ctx, id, Change{From: Live, To: Failed, Generation: gen, Reason: reason}); err != nil {
		s.o.Log.WarnContext(ctx, "mark session failed", slog.String("session_id", id), slog.String("error", err.Error()))
	}
}

func (s *Creator) embedURL(id, tok string) string {
	return strings.TrimRight(s.o.PublicBaseURL, "/") + "/embed/" + id + "?token=" + url.QueryEscape(tok)
}

func validateCreate(req CreateRequest) error {
	invalid := func(format string, args ...any) error {
		return apierror.New(apierror.InvalidRequest, format, args...)
	}
	switch {
	case req.ProjectName == "":
		return invalid("project_name is required.")
	case len(req.ProjectName) > MaxNameLen || !utf8.ValidString(req.ProjectName):
		return invalid("project_name must be at most %d bytes of UTF-8.", MaxNameLen)
	case req.PersonaSlug == "":
		return invalid("persona_slug is required.")
	case len(req.PersonaSlug) > MaxNameLen || !slugPattern.MatchString(req.PersonaSlug):
		return invalid("persona_slug must be at most %d lower-case letters, digits, '-' or '_'.", MaxNameLen)
	case strings.TrimSpace(req.InitialPrompt) == "":
		return invalid("initial_prompt is required.")
	case len(req.InitialPrompt) > MaxPromptBytes || !utf8.ValidString(req.InitialPrompt):
		return invalid("initial_prompt must be at most %d bytes of UTF-8.", MaxPromptBytes)
	case req.SessionType != "" && req.SessionType != "coding" && req.SessionType != "setup":
		return invalid("session_type must be coding or setup.")
	case req.SessionType == "setup" && req.ConfigurationID == "":
		return invalid("A setup session needs a configuration_id.")
	case len(req.ClientType) > MaxNameLen || (req.ClientType != "" && !slugPattern.MatchString(req.ClientType)):
		return invalid("client_type must be at most %d lower-case letters, digits, '-' or '_'.", MaxNameLen)
	case len(req.ConfigurationID) > MaxNameLen || (req.ConfigurationID != "" && !slugPattern.MatchString(req.ConfigurationID)):
		return invalid("configuration_id must be at most %d lower-case letters, digits, '-' or '_'.", MaxNameLen)
	case len(req.SystemPrompt) > MaxPromptBytes || !utf8.ValidString(req.SystemPrompt):
		return invalid("system_prompt must be at most %d bytes of UTF-8.", MaxPromptBytes)
	case req.AgentType != "" && (len(req.AgentType) > 63 || !slugPattern.MatchString(req.AgentType)):
		return invalid("agent_type must be 1 to 63 lower-case letters, digits, '-' or '_'.")
	case req.EndUser != "" && !registry.ValidEndUser(req.EndUser):
		return invalid("end_user must be 1 to 128 letters, digits, '_', '-', '.', '@' or ':', starting with a letter or digit.")
	case len(req.IdempotencyKey) > MaxIdempotencyKeyLen || (req.IdempotencyKey != "" && !Printable.MatchString(req.IdempotencyKey)):
		return invalid("Idempotency-Key must be 1 to %d printable ASCII characters.", MaxIdempotencyKeyLen)
	}
	return nil
}

// checkToken is nil when tok is one of sess's session tokens and still works:
// 401 invalid_token otherwise, also once sess ended more than TokenGrace ago.
func checkToken(sess Session, tok string, now time.Time) error {
	if !tokenMatches(sess, tok) {
		return apierror.New(apierror.InvalidToken, "The session token is not valid for this agent.")
	}
	if sess.TokensExpired(now) {
		return apierror.New(apierror.InvalidToken, "The agent has ended; its session token no longer works.")
	}
	return nil
}

func tokenMatches(sess Session, tok string) bool {
	ok := false
	for _, h := range sess.TokenHashes {
		if token.Match(token.Session, tok, h) { // every hash is compared: no early exit
			ok = true
		}
	}
	return ok
}

// idempotencyRecordKey scopes a client key to its app key (in its tenant) and
// hides it.
func idempotencyRecordKey(app registry.AppKey, key string) string {
	// App key ids are unique within a tenant only.
	return ScopedKey("create", app.Tenant+"/"+app.ID, key)
}

// ScopedKey is an idempotency record key: kind, then the hash of a client's key
// within its scope, so that no client-chosen string reaches the key unbounded.
func ScopedKey(kind, scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return kind + "#" + hex.EncodeToString(sum[:])
}

// HashOf is the SHA-256 of a request's JSON, to tell a retry from a new request.
func HashOf(v any) string {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// newID returns a random version 4 UUID.
func newID() string { return uuid.NewString() }

func or(a, b Features) Features {
	return Features{
		FileUpload:   a.FileUpload || b.FileUpload,
		ContextUsage: a.ContextUsage || b.ContextUsage,
		VoiceMic:     a.VoiceMic || b.VoiceMic,
	}
}
