// Package pool is the warm pool: per agent type, warm_pool_size idle
// sandboxes started ahead of any session, each registered in DynamoDB, and
// claimed by a session's start with one conditional write (a transaction over
// the pool sandbox and the session): a sandbox is claimed at most once, a
// session gets at most one sandbox, and a claimed sandbox never returns to
// the pool (it ends with its session).
//
// A pool sandbox is launched for no session (sandboxwire.EnvPoolSandbox): it
// exchanges its launch code for a pool key, connects to the push channel,
// reports idle, and waits. Claiming sets the session's bootstrap code to the
// pool key's hash and pushes the sandbox an assigned frame; the sandbox then
// bootstraps that session with its pool key like any cold sandbox, and
// fetches its spec (current guardrails, prompt, task context). Replenish
// brings every type back to its size and retires the idle sandboxes that are
// stale: configuration version, image or guardrails changed, idle past a
// maximum age, or silent past the heartbeat timeout.
package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// State is where a pool sandbox is.
type State string

// The states of a pool sandbox: launched and not yet ready; ready to be
// claimed; claimed by a session (never idle again).
const (
	Starting State = "starting"
	Idle     State = "idle"
	Claimed  State = "claimed"
)

// Sandbox is one pool sandbox as registered.
type Sandbox struct {
	ID string `json:"id"`
	// Owner and AgentType name the agent type it is warm for (its owner:
	// a tenant, or registry.Platform).
	Owner     string `json:"owner"`
	AgentType string `json:"agent_type"`
	// Version is the type's configuration version it was started with
	// (Version), Image what it runs, GuardrailsHash the platform guardrails
	// then: a change of any retires it.
	Version        string `json:"version"`
	Image          string `json:"image"`
	GuardrailsHash string `json:"guardrails_hash"`
	State          State  `json:"state"`
	// Ref is its launcher's reference ("" until the launch is recorded).
	Ref             string `json:"sandbox_ref,omitempty"`
	TmuxSessionName string `json:"tmux_session_name"`
	// LaunchCodeHash is the hash of its one-time launch code until it spends
	// it; KeyHash the hash of the pool key it got for it.
	LaunchCodeHash   string `json:"launch_code_hash,omitempty"`
	CodeExpires      int64  `json:"code_expires,omitempty"`
	KeyHash          string `json:"key_hash,omitempty"`
	PushConnectionID string `json:"push_connection_id,omitempty"`
	// Prepare is what it provisions before its claim (a fixed repository's
	// clone and setup commands); nil: nothing.
	Prepare *sandboxwire.WorkspaceSpec `json:"prepare,omitempty"`
	// Times in epoch milliseconds.
	CreatedAt   int64 `json:"created_at"`
	HeartbeatAt int64 `json:"heartbeat_at"`
	IdleAt      int64 `json:"idle_at,omitempty"`
	ClaimedAt   int64 `json:"claimed_at,omitempty"`
	// ClaimedBy is the session that claimed it.
	ClaimedBy string `json:"claimed_by,omitempty"`
}

// Warm reports whether s counts toward its type's size: starting or idle.
func (s Sandbox) Warm() bool { return s.State == Starting || s.State == Idle }

// Errors of a Store.
var (
	// ErrNotFound: no pool sandbox has that id.
	ErrNotFound = errors.New("pool sandbox not found")
	// ErrTaken: the sandbox is no longer what the write expected (claimed
	// meanwhile, retired, or its code spent).
	ErrTaken = errors.New("pool sandbox taken")
	// ErrSessionMoved: the session is no longer provisioning without a
	// sandbox in that generation (another delivery launched or claimed one).
	ErrSessionMoved = errors.New("session moved on")
)

// Claim is what claiming writes on the session: its sandbox, the pool key's
// hash as its bootstrap code (until CodeExpires), its terminal session.
type Claim struct {
	SessionID   string
	Generation  int
	CodeExpires time.Time
	At          time.Time
}

// Store keeps the pool sandboxes (the registry table, package dynamo).
type Store interface {
	// Add registers a new pool sandbox (its id must be new).
	Add(ctx context.Context, s Sandbox) error
	// Get returns the pool sandbox id.
	Get(ctx context.Context, id string) (Sandbox, error)
	// List returns the pool sandboxes of one agent type, every state.
	List(ctx context.Context, owner, agentType string) ([]Sandbox, error)
	// ListAll returns every pool sandbox, bounded by MaxSandboxes.
	ListAll(ctx context.Context) ([]Sandbox, error)
	// SetRef records the launcher's reference of a starting or idle sandbox.
	SetRef(ctx context.Context, id, ref string) error
	// RedeemLaunchCode spends the unexpired launch code codeHash of a
	// starting sandbox, recording the pool key's hash (ErrTaken otherwise).
	RedeemLaunchCode(ctx context.Context, id, codeHash, keyHash string, now time.Time) error
	// Heartbeat records a sign of life of a starting or idle sandbox, and
	// makes a starting one idle if idle is set; it returns the sandbox as it
	// is after (a claimed one unchanged).
	Heartbeat(ctx context.Context, id string, idle bool, now time.Time) (Sandbox, error)
	// SetPushConnection records the sandbox's push connection.
	SetPushConnection(ctx context.Context, id, connectionID string) error
	// Claim claims the idle sandbox s (still of s.Version) for c's session
	// in one transaction: the sandbox becomes claimed by it, and the session,
	// starting (provisioning or resuming) with no sandbox nor launch claim
	// in c.Generation, gets s.Ref as its sandbox, s.KeyHash as its bootstrap code and s's terminal
	// session. ErrTaken: s was not idle; ErrSessionMoved: the session was
	// not as required.
	Claim(ctx context.Context, s Sandbox, c Claim) error
	// Remove deletes the sandbox id if it is in one of states (ErrTaken
	// otherwise; no error if there is none).
	Remove(ctx context.Context, id string, states ...State) error
	// Lock takes the replenish lease of one agent type until until; false if
	// another holds it.
	Lock(ctx context.Context, owner, agentType string, now, until time.Time) (bool, error)
	// Unlock gives the lease up.
	Unlock(ctx context.Context, owner, agentType string) error
}

// MaxSandboxes bounds how many pool sandboxes ListAll reads.
const MaxSandboxes = 5000

// IDPrefix starts every pool sandbox id ("pool-<uuid>"): never a session id.
const IDPrefix = "pool-"

var idPattern = regexp.MustCompile(`^pool-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// IsID reports whether id is a pool sandbox id.
func IsID(id string) bool { return idPattern.MatchString(id) }

// Version is the configuration version of a workspace configuration: what a
// pool sandbox of it has done before its claim depends on (everything but
// the pool's size, the sessions' limits). Sessions and pool sandboxes of
// equal versions match.
func Version(c registry.WorkspaceConfig) string {
	c.WarmPoolSize, c.SessionLimits = 0, nil
	raw, _ := json.Marshal(c)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
