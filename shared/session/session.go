// Package session owns remote agent sessions: their state machine, their tokens,
// and the create / alive / shutdown operations apps call.
//
//	provisioning → ready → working ⇄ idle → ending → ended
//	        └───────────────┴──────────┴──────→ failed
//
// ended and failed are terminal and carry a reason. The store persists sessions
// with conditional writes, so every transition is checked against the state it
// leaves. Its roles (store.go: Lifecycle, Launches, EventLog, Metering,
// QuotaCounts, Fleet, PushConnections) are small interfaces; a package that
// needs a few of their methods declares its own interface of just those, and
// dynamo.Sessions implements them all, as storetest.Memory does for tests.
package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// State is where a session is in its life; the wire's type, which sandboxes
// report and are told.
type State = sandboxwire.State

// The states.
const (
	Provisioning = sandboxwire.Provisioning
	Ready        = sandboxwire.Ready
	Working      = sandboxwire.Working
	Idle         = sandboxwire.Idle
	Ending       = sandboxwire.Ending
	Ended        = sandboxwire.Ended
	Failed       = sandboxwire.Failed
	Pausing      = sandboxwire.Pausing
	Paused       = sandboxwire.Paused
	Resuming     = sandboxwire.Resuming
)

// StatusOf is s in the workspace spec's words (agent-workspace-config):
// provisioning until the agent and its workspace are ready, then active
// (ready, working or idle), ending, and ended (ended or failed).
func StatusOf(s State) string {
	switch {
	case s == Provisioning:
		return "provisioning"
	case slices.Contains(Running, s):
		return "active"
	case s == Ending:
		return "ending"
	case s == Pausing || s == Paused || s == Resuming:
		return string(s)
	default:
		return "ended"
	}
}

// Running lists the states in which the agent is up and usable.
var Running = []State{Ready, Working, Idle}

// Live lists the states that are not terminal.
var Live = []State{Provisioning, Ready, Working, Idle, Ending, Pausing, Paused, Resuming}

// Starting lists the states in which a sandbox is being launched for the
// session and has not reported ready: its first (provisioning), or one
// going on from its checkpoint (resuming).
var Starting = []State{Provisioning, Resuming}

// Reason says why a session ended or failed (the wire's type).
type Reason = sandboxwire.Reason

// The reasons.
const (
	ReasonShutdown = sandboxwire.ReasonShutdown
	ReasonTimeout  = sandboxwire.ReasonTimeout
	// The session limits' reasons.
	ReasonMaxDuration = sandboxwire.ReasonMaxDuration
	ReasonIdleTimeout = sandboxwire.ReasonIdleTimeout
	ReasonTokenBudget = sandboxwire.ReasonTokenBudget
	ReasonCostBudget  = sandboxwire.ReasonCostBudget
	ReasonCrashed     = sandboxwire.ReasonCrashed
	ReasonLost        = sandboxwire.ReasonLost
	ReasonIdle        = sandboxwire.ReasonIdle
	ReasonError       = sandboxwire.ReasonError
	ReasonTokenLimit  = sandboxwire.ReasonTokenLimit
	// ReasonModelUnavailable: the sandbox found no usable model.
	ReasonModelUnavailable = sandboxwire.ReasonModelUnavailable
	// ReasonLaunchFailed: the sandbox could not be launched, on its capacity
	// nor on the fallback (the platform sets it; no sandbox reports it).
	ReasonLaunchFailed Reason = "launch_failed"
	// ReasonUnclaimed: its create answered agent_creation_timeout and nobody
	// took the agent up (a retry of the create with its Idempotency-Key)
	// within UnclaimedLimit (the platform sets it).
	ReasonUnclaimed Reason = "unclaimed"
	// ReasonBudget: its app's spend cap of the day or month was reached; the
	// model gateway stopped its calls (the platform sets it).
	ReasonBudget Reason = "budget"
	// ReasonCheckpointFailed: a pause's checkpoint could not be written, so
	// the agent runs on (not an end: the reason of its return to idle).
	ReasonCheckpointFailed = sandboxwire.ReasonCheckpointFailed
)

// UnclaimedLimit is how long an agent whose create timed out waits for a
// retry of the create that hands it out before it ends (ReasonUnclaimed):
// nobody holds its token until then.
const UnclaimedLimit = 5 * time.Minute

// HeartbeatTimeout is how long a running sandbox may go without a heartbeat before
// its session counts as lost.
const HeartbeatTimeout = 60 * time.Second

// Retention is how long an ended session's record stays before TTL removes it.
const Retention = 7 * 24 * time.Hour

// TokenGrace is how long a session's tokens keep working after it ended
// (ended_at): long enough for a viewer to read the final events and see the
// end, short enough that a leaked token is soon worth nothing. Sandbox tokens
// have none: they stop when the session ends.
const TokenGrace = 5 * time.Minute

// MaxTokens bounds the session tokens one session holds (each idempotent replay
// of its create adds one).
const MaxTokens = 10

// Features are the embed view's optional parts for this session (the wire's
// type: the sandbox's spec carries them).
type Features = sandboxwire.Features

// Session is one remote agent. How a store keeps it (attribute names, index
// keys, TTL, encodings) is the store's: the sessions table's is in package
// dynamo. A session of a tenant is in the tenant's fleet list and counts
// toward its live sessions while it is live; it leaves the table Retention
// after it ended.
type Session struct {
	ID       string
	AppKeyID string
	// Tenant is the app key's tenant: the session uses its projects, personas
	// and configurations, and its automation runs are that tenant's.
	Tenant string
	// Blueprint is what the session was created as: fixed for its life.
	Blueprint
	State  State
	Reason Reason
	// Generation counts launches; a sandbox acts only for its own generation.
	Generation int
	// TokenHashes are the hashes of the session's tokens (never the tokens).
	TokenHashes []string
	// SandboxTokenHash is the hash of the current sandbox's token, set when
	// the sandbox spends its bootstrap code (RedeemBootstrap).
	SandboxTokenHash string
	// Launch is the current sandbox: how it was launched, and how it is
	// reached.
	Launch
	// WorkspaceStatus is how provisioning went, as ready reported it.
	WorkspaceStatus *sandboxwire.WorkspaceStatus
	// WorkspaceDropped says why the sandbox runs without its workspace: its
	// launches with it (its size, its base image) failed, and the last one
	// was without ("": it has it). Its workspace status is then degraded.
	WorkspaceDropped string
	// SnapshotKey is the object key of the session's last saved snapshot.
	SnapshotKey string
	// CheckpointID is its last committed checkpoint ("" none): what a
	// resume goes on from.
	CheckpointID string
	// PausedAt is when it last became paused; PausedFor is how long it was
	// paused before (the limits leave it out).
	PausedAt  time.Time
	PausedFor time.Duration
	// Egress is what its sandbox may reach now: its agent type's policy as
	// create resolved it, then as changes made it (SetEgress); nil is open
	// (no agent type, or a type stored before policies). EgressVersion
	// counts the changes.
	Egress        *egress.Policy
	EgressVersion int
	// ServedGuardrailsHash is the hash of the guardrails the sandbox was last
	// served (its spec); ready must report exactly it.
	ServedGuardrailsHash string
	// Streams are the session's open event streams: id → when the entry
	// lapses, should its stream never say it closed.
	Streams map[string]time.Time
	// Viewers are the live connections (API Gateway's connection ids) the
	// session's events and live events are pushed to (see Viewers);
	// ViewerEpoch counts their changes (Watch).
	Viewers     []string
	ViewerEpoch int64
	// Meter is what its model calls used (see Usage).
	Meter

	CreatedAt        time.Time
	UpdatedAt        time.Time
	PromptInjectedAt time.Time
	ReadyAt          time.Time
	// DueAt, for a live session the sweep watches, is when it must next
	// show life (a heartbeat, leaving provisioning or ending); the stores
	// keep it (DueAfter, EndingLimit) and clear it when the session ends. A
	// session created without one is not watched.
	DueAt time.Time
	// RateLimitedAt is when a model provider last limited (or nearly
	// limited) the session's calls, as the model gateway saw it.
	RateLimitedAt time.Time
	// LastActivityAt is when the session last did something (an event, a
	// model call, a busy heartbeat): what the idle timeout counts from.
	LastActivityAt time.Time
	HeartbeatAt    time.Time
	EndedAt        time.Time
	// LastSeq is the sequence number last taken by an event of the
	// session's stream (its counter). The counter stops when the session
	// ends, so a reader of an ended session has every event once it has
	// read up to LastSeq.
	LastSeq int64
	// ClaimBy, for an agent whose create answered agent_creation_timeout,
	// is when it ends unless a retry of the create handed it out
	// (ClaimedAt) by then.
	ClaimBy   time.Time
	ClaimedAt time.Time
	// EndsAt, for a sandbox of the sandbox API (Blueprint.Sandbox), is
	// when it ends (or pauses, with AutoPause): its timeout, which the API
	// sets and extends (SetEndsAt). Zero: no such end.
	EndsAt time.Time
}

// EgressPolicy is s's egress policy now: open when it has none.
func (s Session) EgressPolicy() egress.Policy {
	if s.Egress == nil {
		return egress.Open()
	}
	return *s.Egress
}

// Unclaimed reports whether s is an agent whose create timed out and that
// nobody took up by its ClaimBy.
func (s Session) Unclaimed(now time.Time) bool {
	return !s.ClaimBy.IsZero() && s.ClaimedAt.IsZero() && now.After(s.ClaimBy)
}

// Blueprint is what a session was created as: the request, with what
// create resolved for it (its agent type's workspace, its app's limits, the
// guardrails it was primed with). Nothing changes it after create.
type Blueprint struct {
	ProjectName   string // omitted when empty: a GSI key cannot be ""
	PersonaSlug   string
	InitialPrompt string
	Features      Features
	// SessionType is "coding" (default) or "setup"; ClientType "automation" marks
	// an automation run. With ConfigurationID and SystemPrompt they select the
	// agent's mode prompt and its tools (see package prompts and toolspec).
	SessionType     string
	ClientType      string
	ConfigurationID string
	SystemPrompt    string
	// AgentType is the session's agent type ("" for none), and Workspace the
	// workspace configuration it had when the session was created, with the
	// platform's defaults filled in: the session keeps it whatever the type
	// becomes. nil: no agent type, no workspace.
	AgentType string
	Workspace *registry.WorkspaceConfig
	// AgentTypeOwner owns the agent type: the tenant, or registry.Platform
	// (whose warm pool the session claims from).
	AgentTypeOwner string
	// AppLimits are the session limits of the app key that created it, as
	// they were then (nil: none).
	AppLimits *registry.SessionLimits
	// AppCaps are the spend caps of the app key that created it, as they
	// were then (the model gateway holds its calls within them and the
	// platform's); nil: none.
	AppCaps *registry.SpendCaps
	// TaskContext is the task create named (validated; its URL without
	// credentials): the workspace's repository and branch, if the type's
	// repo_source is task_context, and the agent's workspace metadata.
	TaskContext *sandboxwire.TaskContext
	// EndUser is the app's user the session works for (create's end_user):
	// whose secrets its requests carry first.
	EndUser string
	// JobID, for the sandbox of an orchestrator job, is that job (package
	// job): the sandbox runs it in job mode.
	JobID string
	// JobTokenLimit is the tokenLimit of that job: the model gateway refuses
	// its calls once its session's tokens reach it (0: none).
	JobTokenLimit int64
	// Sandbox, for a sandbox created through the sandbox API (the
	// E2B-compatible control plane), is what it was created with; nil for
	// an agent.
	Sandbox *SandboxOptions
	// GuardrailsHash is the SHA-256 of the guardrails the agent was primed with.
	GuardrailsHash  string
	TmuxSessionName string
}

// SandboxOptions are what a sandbox of the sandbox API was created with: a
// session like any agent's (quotas, budgets, fleet list, events), with no
// initial prompt, whose processes its client runs through envd.
type SandboxOptions struct {
	// Template is the template the client named: an agent type, or the
	// default template (DefaultSandboxTemplate).
	Template string `json:"template"`
	// Metadata are the client's labels, which its list filters on.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Env is the environment of every process the client starts.
	Env map[string]string `json:"env,omitempty"`
	// AutoPause pauses the sandbox at its end (EndsAt) instead of ending
	// it; AutoResume lets traffic to a paused sandbox resume it.
	AutoPause  bool `json:"auto_pause,omitempty"`
	AutoResume bool `json:"auto_resume,omitempty"`
	// PrivateTraffic keeps the sandbox's preview URLs (its ports but
	// envd's) to holders of its traffic access token or an access token;
	// else anyone with the URL reaches them while it runs.
	PrivateTraffic bool `json:"private_traffic,omitempty"`
}

// DefaultSandboxTemplate is the template of a sandbox that names none: an
// agent type of that id if the app has one, else no agent type.
const DefaultSandboxTemplate = "base"

// Launch is a session's current sandbox: how it was launched, and how the
// platform reaches it.
type Launch struct {
	// PoolSandbox is the warm pool sandbox the session claimed ("" for a
	// cold start).
	PoolSandbox string
	// BootstrapCodeHash is the hash of the one-time code the current launch
	// gave its sandbox, until the sandbox spends it; BootstrapExpires is
	// when it stops working unspent.
	BootstrapCodeHash string
	BootstrapExpires  time.Time
	// LaunchLease is when a claimed but unfinished launch may be replaced by
	// the launch of the next generation; zero while no launch was claimed.
	LaunchLease time.Time
	// SandboxRef identifies the running sandbox to its launcher (task ARN, pid).
	SandboxRef string
	// PushConnectionID is the push channel connection the current sandbox
	// holds (API Gateway's connection id), "" while it holds none: what the
	// platform pushes its inbox wakes to (see Notifier).
	PushConnectionID string
	// Resources is the sandbox's last measure of its use (a job's sandbox
	// heart-beats it).
	Resources *sandboxwire.ResourceSample
}

// Meter is what a session used: its model calls, as the model gateway
// metered them (AddUsage), and the upload URLs it was granted.
type Meter struct {
	InputTokens  int64
	OutputTokens int64
	CachedTokens int64
	ModelCalls   int64
	// CostMicroUSD is what those calls cost, by the price table, in
	// micro-USD.
	CostMicroUSD int64
	// UploadURLs counts the presigned upload URLs the session was granted,
	// UploadBytes the bytes they were signed for (GrantUploads).
	UploadURLs  int64
	UploadBytes int64
}

// Usage counts model tokens: of one call, or all of a session's. The model
// gateway reads them from the provider's own answer, so a sandbox cannot
// change them. InputTokens are all the prompt's tokens, those read from the
// provider's cache included; CachedTokens is that cached part; OutputTokens
// are the reply's, reasoning included.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// Calls counts the model calls metered.
	Calls int64 `json:"calls"`
	// CostMicroUSD is their cost by the price table (0 for models it does
	// not list), and CostUSD the same in USD.
	CostMicroUSD int64   `json:"cost_micro_usd"`
	CostUSD      float64 `json:"cost_usd"`
}

// Usage is what the session's model calls used so far.
func (s Session) Usage() Usage {
	return Usage{InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CachedTokens: s.CachedTokens, Calls: s.ModelCalls,
		CostMicroUSD: s.CostMicroUSD, CostUSD: float64(s.CostMicroUSD) / 1e6}
}

// TokensExpired reports whether the session ended (or failed) more than
// TokenGrace before now, so that its session tokens no longer work.
func (s Session) TokensExpired(now time.Time) bool {
	if !s.State.Terminal() {
		return false
	}
	end := s.EndedAt
	if end.IsZero() {
		end = s.UpdatedAt // every terminal transition sets ended_at; fail closed without
	}
	return now.Sub(end) > TokenGrace
}

// LostChange is the transition of a session whose sandbox was lost at now:
// paused on its last checkpoint (reason lost), which a resume goes on
// from; ended (lost) without one.
func LostChange(s Session, now time.Time) Change {
	if s.CheckpointID != "" {
		return Change{From: Running, To: Paused, Reason: ReasonLost, Generation: s.Generation, Set: Fields{PausedAt: now}}
	}
	return Change{From: Running, To: Ended, Reason: ReasonLost, Generation: s.Generation}
}

// Lost reports whether a running session's sandbox has stopped heart-beating.
func (s Session) Lost(now time.Time) bool {
	if !slices.Contains(Running, s.State) {
		return false
	}
	last := s.HeartbeatAt
	if last.IsZero() {
		last = s.ReadyAt
	}
	return !last.IsZero() && now.Sub(last) > HeartbeatTimeout
}

// Errors of the Store.
var (
	// ErrNotFound: no session with that id.
	ErrNotFound = errors.New("session not found")
	// ErrConflict: the session was not in a state the change allows, or the
	// generation was not the current one. Nothing was written.
	ErrConflict = errors.New("session state conflict")
	// ErrIdempotencyTaken: a create with this idempotency key already exists.
	ErrIdempotencyTaken = errors.New("idempotency key already used")
	// ErrOverQuota: an Admit would pass a quota (see QuotaError).
	ErrOverQuota = errors.New("over quota")
)

// IdempotencyRecord ties a client's Idempotency-Key to the session it created.
type IdempotencyRecord struct {
	Key         string `json:"key"`
	SessionID   string `json:"session_id"`
	RequestHash string `json:"request_hash"`
	// Seq is the event a message's client_message_id appended.
	Seq       int64     `json:"seq,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt int64     `json:"expires_at"`
}

// Change is a transition: the states it may leave, the state it enters, and the
// fields it sets alongside.
type Change struct {
	From []State
	To   State
	// Generation, if not zero, must be the session's current generation.
	Generation int
	Reason     Reason
	Set        Fields
}

// Fields are what a transition or a touch sets besides the state. A zero
// field sets nothing; how each is stored is the Store's business.
type Fields struct {
	// GuardrailsHash is the hash of the guardrails the agent was primed with;
	// ServedGuardrailsHash that of the guardrails its sandbox was served.
	GuardrailsHash       string
	ServedGuardrailsHash string
	PromptInjectedAt     time.Time
	ReadyAt              time.Time
	HeartbeatAt          time.Time
	// SandboxRef identifies the running sandbox to its launcher.
	SandboxRef string
	// AgentType is the session's agent type ("" for none), and Workspace the
	// workspace configuration it had when the session was created, with the
	// platform's defaults filled in: the session keeps it whatever the type
	// becomes. nil: no agent type, no workspace.
	AgentType string                    `json:"agent_type,omitempty"`
	Workspace *registry.WorkspaceConfig `json:"workspace,omitempty"`
	// SnapshotKey is the object key of the session's last saved snapshot.
	SnapshotKey string
	// CheckpointID is its last committed checkpoint; PausedAt when it
	// became paused; PausedFor how long it was paused in all (set on
	// resume).
	CheckpointID string
	PausedAt     time.Time
	PausedFor    time.Duration
	// WorkspaceStatus is how provisioning went (ready's report).
	WorkspaceStatus *sandboxwire.WorkspaceStatus
	// WorkspaceDropped: see Session.
	WorkspaceDropped string
	// Resources is the sandbox's measure of its use; RateLimitedAt when a
	// provider limited its calls.
	Resources     *sandboxwire.ResourceSample
	RateLimitedAt time.Time
	// LastActivityAt is activity (see Session.LastActivityAt).
	LastActivityAt time.Time
	// ClaimBy and ClaimedAt: see Session.
	ClaimBy   time.Time
	ClaimedAt time.Time
}

// LaunchClaim is what a launch claim records (Store.ClaimLaunch).
type LaunchClaim struct {
	// BootstrapCodeHash is the hash of the one-time code the launcher gives
	// the sandbox, which it exchanges for its token until CodeExpires.
	BootstrapCodeHash string
	CodeExpires       time.Time
	// LeaseUntil is when the claim, if no sandbox is recorded by then, may be
	// replaced by the next generation's.
	LeaseUntil time.Time
}

// Event is one thing that happened in a session (agent output, state changes,
// questions), in the order of its sequence number.
type Event struct {
	SessionID string         `json:"session_id"`
	Seq       int64          `json:"seq"`
	Type      string         `json:"type"`
	Data      map[string]any `json:"data,omitempty"`
	// HTML is an agent message's text as sanitised HTML, rendered once as
	// the platform appends the event (package markdown), "" when it was
	// not (too long to keep: readers render it).
	HTML      string    `json:"html,omitempty"`
	At        time.Time `json:"at"`
	ExpiresAt int64     `json:"expires_at,omitempty"`
}

// MaxEventHTMLBytes bounds the HTML an event keeps: with its data, a full
// append stays well inside DynamoDB's 4 MB transaction.
const MaxEventHTMLBytes = 64 * 1024

// MaxEventsPerAppend bounds the events one AppendEvents stores (the wire's
// limit).
const MaxEventsPerAppend = sandboxwire.MaxEventsPerAppend

// NewEvent is an event carrying payload p (package sandboxwire), its data in
// the generic form the store keeps.
func NewEvent(p sandboxwire.Payload) (Event, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s event: %w", p.EventType(), err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		return Event{}, fmt.Errorf("encode %s event: %w", p.EventType(), err)
	}
	return Event{Type: p.EventType(), Data: data}, nil
}
