// Package toolgate runs the gateway-mediated tools a sandbox calls back for, with
// durable, exactly-once semantics: every call is one record in the idempotency
// table, keyed by session, tool and tool_call_id (completion_id for
// automation.complete), holding the payload's hash, its state and its result.
//
//   - The first caller writes the record (in progress, leased until its deadline)
//     and runs the tool; a duplicate meanwhile waits for the result.
//   - A duplicate after completion gets the stored result, marked replayed.
//   - The same key with another payload is refused (409 idempotency_key_reused).
//   - A caller that crashed leaves a lease that runs out at its deadline; the next
//     duplicate then runs the call once more, and the crashed attempt can no longer
//     complete it.
//   - Long tools go on the tools queue: jobworker runs them under its own lease,
//     and a caller that cannot wait any longer gets 202 pending and polls with the
//     same tool_call_id.
package toolgate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/prompts"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Defaults of Options.
const (
	// DefaultRetention keeps completed records (the replay window) a day; the
	// contract asks for at least MinRetention.
	DefaultRetention = 24 * time.Hour
	MinRetention     = 5 * time.Minute
	// DefaultDeadline bounds a call whose context has no deadline.
	DefaultDeadline = 29 * time.Second
	// DefaultMargin is how long before its deadline a caller answers.
	DefaultMargin = 1500 * time.Millisecond
	// DefaultLongWait bounds how long a caller waits for a queued tool.
	DefaultLongWait = 20 * time.Second
	// DefaultWorkerLease is how long jobworker holds a queued call when its
	// context has no deadline (a Lambda function's has: its timeout, which the
	// tools queue's visibility timeout must exceed).
	DefaultWorkerLease = 10 * time.Minute
	// inProgressTTL removes records of calls nobody ever retried.
	inProgressTTL = 7 * 24 * time.Hour
)

// Executor runs a validated call's side effects. An error means the call did not
// happen and may be retried; a tool-level failure is a Result with Success false.
type Executor interface {
	Execute(ctx context.Context, c Call) (Result, error)
}

// Call is one validated call, as an Executor gets it.
type Call struct {
	Session session.Session
	// Tool is the canonical tool name (automation.complete, not its alias).
	Tool string
	// CallID is the idempotency key; Key is the record's key.
	CallID string
	Key    string
	// RequestID is the tool_call_id the request carried (for automation.complete
	// it may differ from CallID, the completion_id).
	RequestID string
	// Args is the decoded arguments (toolspec.VerifyArgs, …).
	Args any
}

// Enqueuer sends a message body to the tools queue.
type Enqueuer interface {
	Send(ctx context.Context, body string, delay time.Duration) (string, error)
}

// Sessions reads the sessions whose sandboxes call (session.Reader).
type Sessions interface {
	// Get reads a session; session.ErrNotFound if absent.
	Get(ctx context.Context, id string) (session.Session, error)
}

// Options configure a Service.
type Options struct {
	Sessions Sessions
	Records  Store
	Executor Executor
	// Queue is the tools queue, for long tools.
	Queue       Enqueuer
	Retention   time.Duration
	Margin      time.Duration
	LongWait    time.Duration
	WorkerLease time.Duration
	Log         *slog.Logger
	Now         func() time.Time
}

// Service answers tool callbacks.
type Service struct{ o Options }

// New returns a service; zero options take the defaults.
func New(o Options) *Service {
	if o.Retention < MinRetention {
		o.Retention = DefaultRetention
	}
	if o.Margin <= 0 {
		o.Margin = DefaultMargin
	}
	if o.LongWait <= 0 {
		o.LongWait = DefaultLongWait
	}
	if o.WorkerLease <= 0 {
		o.WorkerLease = DefaultWorkerLease
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o}
}

// Request is a callback: POST /proliferate/{sessionId}/tools/{toolName}.
type Request struct {
	SessionID  string
	Tool       string
	Token      string
	ToolCallID string
	Args       json.RawMessage
}

// Outcome is the answer: done, with a Result, or still running, with Pending
// (the caller posts the same call again later).
type Outcome struct {
	Result *Result
	// Replayed is set when the result was stored by an earlier request.
	Replayed bool
	Pending  *Pending
}

// Pending tells the caller to post the same call again later.
type Pending struct {
	Status            string `json:"status"`
	ToolCallID        string `json:"tool_call_id"`
	RetryAfterSeconds int    `json:"retry_after_seconds"`
}

// Authenticate returns the live session whose current sandbox holds tok. Every
// other caller is refused alike with forbidden (agent contract 6.3: "reject any
// non-sandbox caller regardless of bearer token presence"): no token, an
// unknown one, another session's sandbox token, a session token, an app key,
// or the token of a session that has ended.
func (s *Service) Authenticate(ctx context.Context, sessionID, tok string) (session.Session, error) {
	sess, err := session.AuthenticateSandbox(ctx, s.o.Sessions, sessionID, tok)
	switch {
	case err != nil && (apierror.CodeOf(err) == "" || apierror.CodeOf(err) == apierror.ServiceUnavailable):
		return session.Session{}, err // the store failed: not the caller's doing
	case err != nil || sess.State.Terminal():
		return session.Session{}, apierror.New(apierror.Forbidden, "Only this session's running sandbox may call its tools.")
	}
	return sess, nil
}

// Call authenticates, validates and runs (or replays) one callback.
func (s *Service) Call(ctx context.Context, req Request) (Outcome, error) {
	sess, err := s.Authenticate(ctx, req.SessionID, req.Token)
	if err != nil {
		return Outcome{}, err
	}
	return s.CallAs(ctx, sess, req)
}

// CallAs validates and runs (or replays) one callback of sess, whose sandbox
// Authenticate has recognised.
func (s *Service) CallAs(ctx context.Context, sess session.Session, req Request) (Outcome, error) {
	def, ok := toolspec.Lookup(req.Tool)
	if !ok {
		return Outcome{}, apierror.New(apierror.NotFound, "No gateway tool is called %q.", req.Tool)
	}
	if def.Domain != toolspec.Gateway {
		return Outcome{}, apierror.New(apierror.InvalidRequest, "%s runs in the sandbox, not through the gateway.", def.Name)
	}
	if !toolspec.ValidCallID(req.ToolCallID) {
		return Outcome{}, apierror.New(apierror.InvalidRequest, "tool_call_id must be 1 to %d printable ASCII characters.", toolspec.MaxCallIDLen)
	}
	args, err := toolspec.Parse(def.Name, req.Args)
	if err != nil {
		return Outcome{}, apierror.New(apierror.InvalidRequest, "%s: %s", def.Name, err.Error())
	}
	if def.SetupOnly && sess.SessionType != prompts.SessionSetup {
		return Outcome{}, apierror.New(apierror.Forbidden, "%s is only available in setup sessions.", def.Name)
	}
	key := req.ToolCallID
	if c, ok := args.(toolspec.CompleteArgs); ok {
		key = c.CompletionID // the contract's idempotency key for completions
	}
	canon, err := json.Marshal(args)
	if err != nil {
		return Outcome{}, fmt.Errorf("encode %s arguments: %w", def.Name, err)
	}
	call := Call{Session: sess, Tool: def.Name, CallID: key, Key: RecordKey(sess.ID, def.Name, key), RequestID: req.ToolCallID, Args: args}
	return s.run(ctx, def, call, canon)
}

// RecordKey is the record key of a call: scoped by session and tool, hashed so
// that no caller-chosen string reaches the key unbounded.
func RecordKey(sessionID, tool, callID string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + tool + "\x00" + callID))
	return "tool#" + hex.EncodeToString(sum[:])
}

func payloadHash(tool string, canon []byte) string {
	sum := sha256.Sum256(append([]byte(tool+"\x00"), canon...))
	return hex.EncodeToString(sum[:])
}

// run is the record's state machine for one request.
func (s *Service) run(ctx context.Context, def toolspec.Def, call Call, canon []byte) (Outcome, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = s.o.Now().Add(DefaultDeadline)
	}
	answerBy := deadline.Add(-s.o.Margin)
	if def.Long {
		answerBy = minTime(answerBy, s.o.Now().Add(s.o.LongWait))
	}
	now := s.o.Now()
	rec := Record{
		Key: call.Key, SessionID: call.Session.ID, Tool: call.Tool, CallID: call.CallID,
		PayloadHash: payloadHash(call.Tool, canon), Args: canon,
		State: InProgress, Phase: Handler, Attempt: 1, LeaseUntil: deadline.UnixMilli(),
		CreatedAt: now.UTC(), ExpiresAt: now.Add(inProgressTTL).Unix(),
	}
	cur, created, err := s.o.Records.Begin(ctx, rec, now)
	if err != nil {
		return Outcome{}, err
	}
	if created {
		return s.execute(ctx, def, call, rec, answerBy)
	}
	for {
		if cur.PayloadHash != rec.PayloadHash {
			return Outcome{}, apierror.New(apierror.IdempotencyKeyReused, "This tool_call_id was used for a call with different arguments.")
		}
		if cur.State == Completed {
			return Outcome{Result: cur.Result, Replayed: true}, nil
		}
		now = s.o.Now()
		if cur.LeaseExpired(now) {
			// Whoever held it crashed or gave up: run it once more.
			taken, err := s.o.Records.TakeOver(ctx, call.Key, cur.Attempt, now, Handler, deadline.UnixMilli())
			if err == nil {
				s.o.Log.WarnContext(ctx, "tool call taken over after an expired lease",
					slog.String("session_id", call.Session.ID), slog.String("tool", call.Tool), slog.String("tool_call_id", call.CallID), slog.Int("attempt", taken.Attempt))
				return s.execute(ctx, def, call, taken, answerBy)
			}
			if !errors.Is(err, ErrConflict) {
				return Outcome{}, err
			}
		} else if !now.Before(answerBy) {
			return pending(call), nil
		}
		if cur, err = s.wait(ctx, call.Key, cur, answerBy); err != nil {
			if errors.Is(err, ErrNotFound) {
				return s.run(ctx, def, call, canon) // expired meanwhile: start afresh
			}
			return Outcome{}, err
		}
	}
}

// wait polls the record until it changes state, its lease runs out, or answerBy.
func (s *Service) wait(ctx context.Context, key string, cur Record, answerBy time.Time) (Record, error) {
	delay := 25 * time.Millisecond
	for {
		until := minTime(answerBy, time.UnixMilli(cur.LeaseUntil))
		sleep := min(delay, max(until.Sub(s.o.Now()), time.Millisecond))
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-time.After(sleep):
		}
		delay = min(delay*2, 250*time.Millisecond)
		next, err := s.o.Records.Get(ctx, key)
		if err != nil {
			return cur, err
		}
		if next.Expired(s.o.Now()) {
			return cur, ErrNotFound
		}
		now := s.o.Now()
		if next.State != cur.State || next.Attempt != cur.Attempt || next.LeaseExpired(now) || !now.Before(answerBy) {
			return next, nil
		}
		cur = next
	}
}

// execute runs the call this request holds: inline, or on the tools queue.
func (s *Service) execute(ctx context.Context, def toolspec.Def, call Call, rec Record, answerBy time.Time) (Outcome, error) {
	if def.Long && s.o.Queue != nil {
		if err := s.enqueue(ctx, rec); err != nil {
			return Outcome{}, err
		}
		cur, err := s.wait(ctx, call.Key, rec, answerBy)
		if err != nil {
			return Outcome{}, err
		}
		if cur.State == Completed {
			return Outcome{Result: cur.Result}, nil
		}
		return pending(call), nil
	}
	res, err := s.complete(ctx, call, rec.Attempt)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: &res}, nil
}

// complete runs the executor for the held attempt and stores its result. If the
// executor fails, the lease is given up at once so that a retry runs again.
func (s *Service) complete(ctx context.Context, call Call, attempt int) (Result, error) {
	res, err := s.o.Executor.Execute(ctx, call)
	if err != nil {
		s.release(call, attempt)
		s.o.Log.ErrorContext(ctx, "tool call failed", slog.String("session_id", call.Session.ID), slog.String("tool", call.Tool),
			slog.String("tool_call_id", call.CallID), slog.String("error", err.Error()))
		return Result{}, &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The tool could not run; retry with the same tool_call_id.", RetryAfter: 1}
	}
	now := s.o.Now()
	err = s.o.Records.Complete(context.WithoutCancel(ctx), call.Key, attempt, res, now, now.Add(s.o.Retention).Unix())
	if errors.Is(err, ErrConflict) {
		// A later attempt took over (this one outlived its lease): its result
		// stands. Answer with it if it is there.
		if cur, gerr := s.o.Records.Get(ctx, call.Key); gerr == nil && cur.State == Completed && cur.Result != nil {
			return *cur.Result, nil
		}
		return res, nil
	}
	if err != nil {
		return Result{}, err
	}
	s.o.Log.InfoContext(ctx, "tool call completed", slog.String("session_id", call.Session.ID), slog.String("tool", call.Tool),
		slog.String("tool_call_id", call.CallID), slog.Int("attempt", attempt), slog.Bool("success", res.Success))
	return res, nil
}

func (s *Service) release(call Call, attempt int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.o.Records.Hold(ctx, call.Key, attempt, s.o.Now(), Handler, 0); err != nil && !errors.Is(err, ErrConflict) {
		s.o.Log.WarnContext(ctx, "release tool call lease", slog.String("tool_call_id", call.CallID), slog.String("error", err.Error()))
	}
}

func pending(call Call) Outcome {
	return Outcome{Pending: &Pending{Status: "pending", ToolCallID: call.RequestID, RetryAfterSeconds: 1}}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
