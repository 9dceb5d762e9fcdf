package session

import (
	"context"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
)

// The session store's roles. Each is what one part of the platform does with
// sessions; a package that needs some of them declares its own interface of
// just the methods it calls (toolgate, modelgateway, eventsapi, jobworker),
// and dynamo.Sessions and storetest.Memory implement every role.

// Reader reads sessions.
type Reader interface {
	// Get reads a session, strongly consistent. ErrNotFound if absent.
	Get(ctx context.Context, id string) (Session, error)
}

// Lifecycle creates sessions and moves them through their states.
type Lifecycle interface {
	Reader
	// Create writes a new session, and its idempotency record if rec is not nil, all
	// or nothing. It returns ErrIdempotencyTaken (and writes nothing) if rec's key
	// is already used. A live session of a tenant takes one of the tenant's
	// live slots (LiveCount), which its end gives back.
	Create(ctx context.Context, s Session, rec *IdempotencyRecord) error
	// Admit is Create within the quotas of a: in the same write the tenant's
	// live count must stay within a.LiveLimit and its creates in a.Minute
	// within a.MinuteLimit (a zero limit is none). ErrOverQuota (naming the
	// quota) and nothing written otherwise.
	Admit(ctx context.Context, s Session, rec *IdempotencyRecord, a Admission) error
	// Idempotency reads the record of a key. ErrNotFound if absent.
	Idempotency(ctx context.Context, key string) (IdempotencyRecord, error)
	// Remember writes an idempotency record on its own, unless its key is
	// used (ErrIdempotencyTaken).
	Remember(ctx context.Context, rec IdempotencyRecord) error
	// Transition applies c and returns the session as changed, or ErrConflict.
	Transition(ctx context.Context, id string, c Change) (Session, error)
	// AddToken adds a session token hash if the session holds fewer than MaxTokens
	// and is not terminal; ErrConflict otherwise.
	AddToken(ctx context.Context, id, tokenHash string) error
	// Touch sets fields (heartbeat, sandbox details) on a live session of the given
	// generation without changing its state; ErrConflict otherwise.
	Touch(ctx context.Context, id string, generation int, set Fields) (Session, error)
	// SetEgress replaces the egress policy of a live session whose policy
	// is still of version (Session.EgressVersion), and counts the change;
	// ErrConflict otherwise.
	SetEgress(ctx context.Context, id string, version int, p egress.Policy) (Session, error)
	// SetEndsAt sets when a live session ends (Session.EndsAt) to at; with
	// extendOnly, only if it ends before at. ErrConflict when nothing was
	// set: the session is over, or (extendOnly) it ends at at or later.
	SetEndsAt(ctx context.Context, id string, at time.Time, extendOnly bool) (Session, error)
}

// Launches hands a session's sandbox its credentials: the launch's one-time
// bootstrap code, and the sandbox token the sandbox exchanges it for.
type Launches interface {
	// ClaimLaunch claims the launch of generation gen of a provisioning session
	// that has no sandbox recorded: it records c's bootstrap code hash, its
	// expiry and the lease, and removes any sandbox token hash. The claim is
	// either the first of the session's current generation gen (no lease taken
	// yet), or it replaces the claim of generation gen-1 whose lease ran out
	// before a sandbox was recorded, and moves the session to gen: whatever the
	// lost claim may have started holds a code (or a token it got for one) and a
	// generation that no longer work, so a claim never hands out a credential its
	// sandbox does not hold. ErrConflict otherwise (a lease runs, a sandbox is
	// recorded, the session moved on).
	ClaimLaunch(ctx context.Context, id string, gen int, c LaunchClaim) error
	// RedeemBootstrap spends the bootstrap code of generation gen of a live
	// session: if the session holds exactly codeHash, unexpired, it records
	// sandboxTokenHash and forgets the code, so that it works once. ErrConflict
	// otherwise (another code, spent, expired, another generation, the session
	// over); ErrNotFound for an unknown id.
	RedeemBootstrap(ctx context.Context, id string, gen int, codeHash, sandboxTokenHash string) error
}

// EventLog keeps a session's events in order.
type EventLog interface {
	// AppendEvents gives events the next sequence numbers of a live session of the
	// given generation and stores them, all or nothing. It returns them numbered.
	AppendEvents(ctx context.Context, id string, generation int, events []Event) ([]Event, error)
	// AppendOnce appends events with an idempotency record (its Seq set to the
	// last event's), all or nothing; ErrIdempotencyTaken if the record's key
	// is used.
	AppendOnce(ctx context.Context, id string, generation int, events []Event, rec IdempotencyRecord) ([]Event, error)
	// Events returns up to limit events after sequence number after, in order.
	Events(ctx context.Context, id string, after int64, limit int) ([]Event, error)
	// AppendAppEvent appends e to tenant's own stream (AppStream: what
	// happens to an app rather than to one of its agents), unless once is
	// used already (ok false, nothing written); once keys are kept for an
	// hour.
	AppendAppEvent(ctx context.Context, tenant, once string, e Event) (out Event, ok bool, err error)
}

// Metering counts usage and spend outside any hold: the model gateway's
// calls are held and settled (Budgets); these add what was used elsewhere
// (and set up the tests of what reads it).
type Metering interface {
	// AddUsage adds u to the session's usage, in one atomic update: adds made
	// at once all count. It counts whatever the session's state, so that a
	// call that began before the session ended is not lost. ErrNotFound if
	// there is no such session.
	AddUsage(ctx context.Context, id string, u Usage) error
	// AddSpend adds micro-USD to tenant's spend of the UTC day that starts
	// at day; Spend reads it (0 when nothing was added).
	AddSpend(ctx context.Context, tenant string, day time.Time, microUSD int64) error
	Spend(ctx context.Context, tenant string, day time.Time) (int64, error)
}

// QuotaCounts counts what the quotas bound (config.Quotas).
type QuotaCounts interface {
	// CountLive counts tenant's live sessions, up to limit, on an index
	// that lags writes (what RepairLive checks the exact count against).
	CountLive(ctx context.Context, tenant string, limit int) (int, error)
	// LiveCount is tenant's exact count of live sessions: the counter that
	// creates take from (Admit) and ends give back to, in their own writes.
	LiveCount(ctx context.Context, tenant string) (int, error)
	// RepairLive sets tenant's live count to what the index counts, if the
	// two differ and the count has not moved for quiet (a crash, or a bug,
	// left it off); it returns the count as it now stands.
	RepairLive(ctx context.Context, tenant string, quiet time.Duration) (int, error)
	// OpenStream records the open event stream stream of session id until
	// until; ErrConflict when limit unlapsed ones are open already.
	OpenStream(ctx context.Context, id, stream string, until, now time.Time, limit int) error
	// CloseStream forgets the stream.
	CloseStream(ctx context.Context, id, stream string) error
	// GrantUploads: see UploadGrants.
	GrantUploads(ctx context.Context, id string, urls int, bytes int64, q UploadQuota) error
}

// UploadGrants counts the upload URLs a session is granted.
type UploadGrants interface {
	Reader
	// GrantUploads adds urls and bytes to live session id's Meter.UploadURLs
	// and UploadBytes in one atomic update, unless either would pass its
	// part of q (a zero part is no bound): ErrConflict, nothing added.
	GrantUploads(ctx context.Context, id string, urls int, bytes int64, q UploadQuota) error
}

// Fleet reads sessions across the fleet, through the indexes.
type Fleet interface {
	// ListByTenant reads up to limit of a tenant's sessions that match f,
	// newest first, after the cursor a previous call returned ("" starts);
	// it returns the cursor to go on with, "" at the end, and may return fewer
	// than limit sessions with a cursor (those it read did not match). A
	// cursor of another tenant, or not one it returned, is ErrBadCursor.
	ListByTenant(ctx context.Context, tenant string, f ListFilter, limit int, after string) ([]Session, string, error)
	// Due returns up to limit ids of the live sessions of one watch shard
	// whose DueAt is before the given time, most overdue first.
	Due(ctx context.Context, shard string, before time.Time, limit int) ([]string, error)
}

// PushConnections records which push connection a session's sandbox holds.
type PushConnections interface {
	// SetPushConnection records connectionID as the push connection of the
	// sandbox of generation gen of live session id, replacing any other, and
	// remembers which session it is of until expires (ClearPushConnection).
	// ErrConflict otherwise (another generation, the session over);
	// ErrNotFound for an unknown id.
	SetPushConnection(ctx context.Context, id string, gen int, connectionID string, expires time.Time) error
	// ClearPushConnection forgets connectionID: its session no longer holds
	// it, if it still did (a later connection is kept). Forgetting a
	// connection it never recorded, or forgot already, is no error.
	ClearPushConnection(ctx context.Context, connectionID string) error
}

// Store is every role at once: what a session store implements, and what the
// Service, which runs every session operation, takes.
type Store interface {
	Lifecycle
	Launches
	EventLog
	Metering
	Budgets
	QuotaCounts
	Fleet
	PushConnections
}

// Viewers are the live connections that watch sessions (the embed view's
// WebSocket): each session's set of them, which every append reads back
// and pushes to, and the text so far of the message its agent is writing,
// for a viewer that joins in the middle of it.
type Viewers interface {
	// AddViewer records connectionID as a viewer of session id until
	// expires; ErrOverQuota when the session has max viewers,
	// ErrNotFound for an unknown id. It returns the session's viewers
	// after, as Watch.
	AddViewer(ctx context.Context, id, connectionID string, max int, expires time.Time) (Watch, error)
	// ViewerSession is the session connectionID watches; ErrNotFound if
	// none.
	ViewerSession(ctx context.Context, connectionID string) (string, error)
	// RemoveViewer takes connectionID out of session id's viewers, and
	// returns those left, as Watch.
	RemoveViewer(ctx context.Context, id, connectionID string) (Watch, error)
	// AddPartial adds text, which follows the first offset characters
	// (code points) of message messageID, to the message being written;
	// offset 0 starts it. ErrConflict, and nothing kept, for a piece that
	// does not follow what is kept, or past MaxPartialChars.
	AddPartial(ctx context.Context, id, messageID string, offset int, text string) error
	// Partial is the message being written, or last written (zero: none).
	Partial(ctx context.Context, id string) (Partial, error)
}

// Watch is how many viewers watch a session, as of Epoch: a number every
// change to its viewers raises, so that its sandbox, told of changes over
// more than one way (pushed, in answers), keeps the latest.
type Watch struct {
	Viewers int
	Epoch   int64
	// PushConnectionID is the sandbox's push connection as of the change
	// (what to tell it over).
	PushConnectionID string
}

// Partial is the text so far of a message an agent is writing.
type Partial struct {
	MessageID string
	Text      string
}

// Bounds of the message being written.
const (
	// MaxPartialChars bounds the text so far that is kept of one message: a
	// viewer joining past it sees the rest as it comes, and the whole
	// message once it is stored.
	MaxPartialChars = 64 << 10
	// PartialRetention is how long it is kept after its last piece.
	PartialRetention = 24 * time.Hour
)
