// Package queueworker is the jobworker function's consumer of the jobs queue:
// session.start launches a session's sandbox (once per session and generation, however often the message arrives),
// session.stop stops a sandbox that did not end by itself, and task.state ends the
// session of a sandbox that stopped. It also consumes the tools queue: tool.run
// runs a long gateway tool call (package toolgate). It answers SQS batches with
// partial batch failures; a malformed message is poison and goes straight to the
// DLQ of its queue.
package queueworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/retry"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/tasksize"
	"github.com/remote-agents/remote-agents/shared/token"
	"github.com/remote-agents/remote-agents/shared/toolgate"
)

// LaunchLease is how long a launch claim holds before another delivery may
// replace it with the launch of the next generation: long enough for the
// launcher to start a sandbox and the worker to record it (the jobs queue's
// visibility timeout, after which the message of a worker that died comes back,
// is longer).
const LaunchLease = 2 * time.Minute

// BootstrapTTL is how long a launched sandbox has to spend its bootstrap code:
// a Fargate task can wait minutes for capacity and its image before the agent
// starts.
const BootstrapTTL = 15 * time.Minute

// stopGrace is what session.stop gives a sandbox between SIGTERM (or StopTask) and
// the kill: the session already had session.StopGrace to end by itself.
const stopGrace = 5 * time.Second

// Sender sends a message body to a queue (the DLQ).
type Sender interface {
	Send(ctx context.Context, body string, delay time.Duration) (string, error)
}

// Store is what the worker does with sessions: reads them, claims their
// launches (session.Launches' ClaimLaunch), records their sandboxes (Touch)
// and ends them (Transition).
type Store interface {
	// Get reads a session; session.ErrNotFound if absent.
	Get(ctx context.Context, id string) (session.Session, error)
	// ClaimLaunch claims the launch of generation gen (see
	// session.Launches); session.ErrConflict when it may not.
	ClaimLaunch(ctx context.Context, id string, gen int, c session.LaunchClaim) error
	// Touch sets fields on a live session of generation gen;
	// session.ErrConflict otherwise.
	Touch(ctx context.Context, id string, gen int, set session.Fields) (session.Session, error)
	// Transition applies c; session.ErrConflict when the session is not in
	// a state c leaves.
	Transition(ctx context.Context, id string, c session.Change) (session.Session, error)
}

// Worker handles jobs-queue messages.
type Worker struct {
	Store      Store
	Launcher   launch.Launcher
	DLQ        Sender
	GatewayURL string
	// ModelGatewayURL is where sandboxes reach the model route, if not at
	// GatewayURL.
	ModelGatewayURL string
	// PushURL is the push channel sandboxes connect to; "" none.
	PushURL string
	// Tools runs tools-queue jobs; ToolsDLQ takes the poison ones.
	Tools    ToolRunner
	ToolsDLQ Sender
	// Sweeper runs the sweep messages (session.Sweeper); nil ignores them.
	Sweeper Sweeper
	Log     *slog.Logger
	// Jobs runs orchestrator jobs (job.run, job.cancel); nil: none.
	Jobs JobRunner
	// Pool is the warm pool: starts claim from it first, and the sweep
	// replenishes it; nil: every start is cold.
	Pool Pool
	// Addresses records where running sandbox tasks are (task.running),
	// for the egress proxy to know them by; nil: not recorded.
	Addresses Addresses
	// Checkpoints deletes an agent's checkpoints once it ended for good;
	// nil: kept.
	Checkpoints Checkpoints
	// Expiries sends session.expire again while a sandbox's end is further
	// off than a queue delays; nil: no sandbox of the sandbox API expires.
	Expiries Publisher
	// Now is the clock launch leases are taken by; nil means time.Now.
	Now func() time.Time
}

// Publisher sends jobs-queue messages.
type Publisher interface {
	Publish(ctx context.Context, m jobqueue.Message, delay time.Duration) error
}

// Checkpoints deletes agents' checkpoints (checkpoint.Service).
type Checkpoints interface {
	Delete(ctx context.Context, id string) error
}

// forget deletes the checkpoints of sess, which ended for good: nothing
// resumes or forks it any more. A failure is logged; the next stop or
// sweep of it does not come, so it is left (an operator's to delete).
func (w *Worker) forget(ctx context.Context, sess session.Session) {
	if w.Checkpoints == nil || !sess.State.Terminal() || sess.JobID != "" {
		return
	}
	if err := w.Checkpoints.Delete(ctx, sess.ID); err != nil {
		w.Log.WarnContext(ctx, "delete an ended agent's checkpoints", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
}

// Addresses records the addresses of running sandboxes (dynamo.Addresses).
type Addresses interface {
	// Record says a's sandbox runs at a.Addr, until expires at the latest.
	Record(ctx context.Context, a launch.Address, expires time.Time) error
	// Forget removes a's records (its address's, its sandbox's), each if it
	// is still a.Ref's.
	Forget(ctx context.Context, a launch.Address) error
}

// AddressLife bounds how long an address's record lives should its task's
// stop never be heard of: the longest a session may last.
const AddressLife = 31 * 24 * time.Hour

// Pool is the warm pool's side of the worker (pool.Service).
type Pool interface {
	// Claim gives sess a warm sandbox, if one is idle; done is false when
	// the start is to go the cold path.
	Claim(ctx context.Context, sess session.Session) (done bool, err error)
	// Retell tells sess's claimed sandbox of its claim again.
	Retell(ctx context.Context, sess session.Session) error
	// Exited is told a pool sandbox stopped; it returns the session that
	// had claimed it ("" none).
	Exited(ctx context.Context, id string) (string, error)
	// Replenish brings every type's pool back to its size and retires the
	// stale sandboxes.
	Replenish(ctx context.Context) (pool.Report, error)
}

// Sweeper ends the sessions nobody would otherwise end (session.Sweeper).
type Sweeper interface {
	Sweep(ctx context.Context) (session.SweepReport, error)
}

// JobRunner is the orchestrator jobs' side of the worker (job.Service).
type JobRunner interface {
	// Prepare gives a created job the session of its sandbox, once, and
	// returns it; run is false when the job needs no sandbox.
	Prepare(ctx context.Context, jobID string) (sessionID string, run bool, err error)
	// SessionOf returns the session of a job's sandbox ("" for none).
	SessionOf(ctx context.Context, jobID string) (string, error)
	// Size is the size of a job's sandbox: what its memory constraint needs
	// (zero: the launcher's default).
	Size(ctx context.Context, jobID string) (tasksize.Size, error)
	// Crashed fails a live job with category crash.
	Crashed(ctx context.Context, jobID, message string) error
	// OutOfMemory fails a live job with category memory_limit.
	OutOfMemory(ctx context.Context, jobID, message string) error
	// IsolationUnavailable fails a live job with category
	// policy_violation: its sandbox could not be launched cut off from
	// the network, so nothing of it ran.
	IsolationUnavailable(ctx context.Context, jobID, message string) error
	// Sweep publishes the outbox's leftovers and fails running jobs whose
	// sandbox is gone.
	Sweep(ctx context.Context) error
}

// ToolRunner runs a tools-queue message (toolgate.Service).
type ToolRunner interface {
	RunQueued(ctx context.Context, body string) error
}

// Handle processes an SQS batch and reports the records to retry.
func (w *Worker) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	// The records of one session, job or sandbox are handled in their
	// order; those of different ones at once: a batch of ten launches
	// takes the slowest one's time, not the sum of theirs.
	groups := map[string][]int{}
	var keys []string
	for i, rec := range ev.Records {
		k := recordKey(rec)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	failed := make([]bool, len(ev.Records))
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			for _, i := range groups[k] {
				rec := ev.Records[i]
				if err := w.handleRecord(ctx, rec); err != nil {
					w.Log.ErrorContext(ctx, "job failed", slog.String("message_id", rec.MessageId), slog.String("error", err.Error()))
					failed[i] = true
				}
			}
		})
	}
	wg.Wait()
	var res events.SQSEventResponse
	for i, rec := range ev.Records {
		if failed[i] {
			res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return res, nil
}

// recordKey is what a record is about, for Handle: its session, its job,
// its sandbox; a tool job or a message that does not parse is about
// itself.
func recordKey(rec events.SQSMessage) string {
	if toolgate.IsJob(rec.Body) {
		return "message:" + rec.MessageId
	}
	m, err := jobqueue.Parse(rec.Body)
	switch {
	case err != nil:
		return "message:" + rec.MessageId
	case m.SessionID != "":
		return "session:" + m.SessionID
	case m.JobID != "":
		return "job:" + m.JobID
	case m.SandboxRef != "":
		return "sandbox:" + m.SandboxRef
	}
	return "message:" + rec.MessageId
}

func (w *Worker) handleRecord(ctx context.Context, rec events.SQSMessage) error {
	if toolgate.IsJob(rec.Body) {
		return w.runTool(ctx, rec)
	}
	m, err := jobqueue.Parse(rec.Body)
	if errors.Is(err, jobqueue.ErrIgnored) {
		return nil
	}
	if err != nil {
		w.Log.ErrorContext(ctx, "poison job message sent to the DLQ", slog.String("message_id", rec.MessageId), slog.String("error", err.Error()))
		if _, err := w.DLQ.Send(ctx, rec.Body, 0); err != nil {
			return fmt.Errorf("dead-letter %s: %w", rec.MessageId, err)
		}
		return nil
	}
	return w.Do(ctx, m)
}

func (w *Worker) runTool(ctx context.Context, rec events.SQSMessage) error {
	if w.Tools == nil {
		return errors.New("tool job on a worker without tools")
	}
	err := w.Tools.RunQueued(ctx, rec.Body)
	if errors.Is(err, toolgate.ErrMalformed) {
		w.Log.ErrorContext(ctx, "poison tool message sent to the DLQ", slog.String("message_id", rec.MessageId), slog.String("error", err.Error()))
		if _, err := w.ToolsDLQ.Send(ctx, rec.Body, 0); err != nil {
			return fmt.Errorf("dead-letter %s: %w", rec.MessageId, err)
		}
		return nil
	}
	return err
}

// Do handles one message. A nil error means it is done (or needs nothing).
func (w *Worker) Do(ctx context.Context, m jobqueue.Message) error {
	switch m.Type {
	case jobqueue.SessionStart:
		return w.start(ctx, m)
	case jobqueue.SessionStop:
		return w.stop(ctx, m)
	case jobqueue.SessionExpire:
		return w.expire(ctx, m)
	case jobqueue.TaskState:
		if err := w.forgetAddress(ctx, m); err != nil {
			return err
		}
		return w.taskStopped(ctx, m)
	case jobqueue.TaskRunning:
		return w.recordAddress(ctx, m)
	case jobqueue.Sweep:
		return w.sweep(ctx)
	case jobqueue.JobRun:
		return w.runJob(ctx, m)
	case jobqueue.JobCancel:
		return w.cancelJob(ctx, m)
	case jobqueue.JobSweep:
		if w.Jobs == nil {
			return errors.New("job.sweep on a worker without jobs")
		}
		return w.Jobs.Sweep(ctx)
	default:
		return fmt.Errorf("%w: type %q", jobqueue.ErrMalformed, m.Type)
	}
}

// start launches the sandbox of m's session, if it has none yet. The sandbox
// gets a one-time bootstrap code (stored hashed with the claim), which it
// exchanges for its token at start (sandboxchannel.Service.Bootstrap): no token is
// ever in what the launcher passes. A claim that lost its lease (its worker
// died, or took longer than LaunchLease to record the sandbox) is replaced by
// the launch of the next generation with a new code: the launcher would answer
// the lost claim's generation with the sandbox it may have started, which
// holds the lost claim's code or the token it got for it. That sandbox can no
// longer act (the claim removed its token, its code and generation are stale)
// and stops at its first call; the worker that lost its claim stops the
// sandbox it started when recording it fails. A sandbox that got ready on its
// claim before the message came back is recorded by that delivery
// (recordLaunched).
func (w *Worker) start(ctx context.Context, m jobqueue.Message) error {
	sess, err := w.Store.Get(ctx, m.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// A start of an earlier generation still asks for the session's sandbox:
	// its generation moved on only because a claim was replaced.
	if m.Generation > sess.Generation || sess.State.Terminal() {
		return nil // over
	}
	if !slices.Contains(session.Starting, sess.State) {
		if slices.Contains(session.Running, sess.State) && sess.SandboxRef == "" && sess.PoolSandbox == "" && !sess.LaunchLease.IsZero() {
			return w.recordLaunched(ctx, sess)
		}
		return nil // running, pausing or paused
	}
	if sess.SandboxRef != "" {
		if sess.PoolSandbox != "" && w.Pool != nil {
			// Claimed from the pool: the worker that claimed may have died
			// before it told the sandbox.
			return w.Pool.Retell(ctx, sess)
		}
		return nil // launched already
	}
	// A warm sandbox first, for a resume too: its sandbox makes its
	// workspace the checkpoint's, over what the type prepared.
	if sess.LaunchLease.IsZero() && w.Pool != nil {
		done, err := w.Pool.Claim(ctx, sess)
		if err != nil {
			return fmt.Errorf("claim a warm sandbox for %s: %w", sess.ID, err)
		}
		if done {
			return nil
		}
	}
	gen := sess.Generation
	if !sess.LaunchLease.IsZero() {
		gen++ // the claim of sess.Generation ran out (or still runs: ErrConflict)
	}
	code, hash := token.New(token.Bootstrap)
	now := w.now()
	err = w.Store.ClaimLaunch(ctx, sess.ID, gen, session.LaunchClaim{BootstrapCodeHash: hash, CodeExpires: now.Add(BootstrapTTL), LeaseUntil: now.Add(LaunchLease)})
	if errors.Is(err, session.ErrConflict) {
		return nil // another delivery holds the launch, or it is done
	}
	if err != nil {
		return err
	}
	ref, err := w.launch(ctx, sess, launch.Spec{
		SessionID:       sess.ID,
		Generation:      gen,
		GatewayURL:      w.GatewayURL,
		BootstrapCode:   code,
		ModelGatewayURL: w.ModelGatewayURL,
		PushURL:         w.PushURL,
		TmuxSessionName: sess.TmuxSessionName,
		Size:            w.size(ctx, sess),
		Image:           baseImage(sess),
		Isolated:        sess.EgressPolicy().Isolated(),
		Offline:         sess.EgressPolicy().Offline(),
	})
	if errors.Is(err, errLaunchFailed) {
		return nil // the session failed: nothing to retry
	}
	if err != nil {
		return fmt.Errorf("launch %s: %w", sess.ID, err)
	}
	err = w.record(ctx, sess.ID, gen, ref)
	if errors.Is(err, session.ErrConflict) {
		// The session ended, or our claim was replaced: nobody else will stop
		// this sandbox.
		w.Log.WarnContext(ctx, "sandbox launched for a session that moved on: stopping it", slog.String("session_id", sess.ID),
			slog.Int("generation", gen), slog.String("sandbox_ref", ref))
		if err := w.Launcher.Stop(ctx, ref, stopGrace); err != nil {
			return fmt.Errorf("stop unrecorded sandbox of %s: %w", sess.ID, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("record sandbox of %s: %w", sess.ID, err)
	}
	w.Log.InfoContext(ctx, "sandbox launched", slog.String("session_id", sess.ID), slog.Int("generation", gen), slog.String("sandbox_ref", ref))
	return nil
}

// recordLaunched records the sandbox of a running session whose launch was
// claimed and never recorded: the worker that launched it died before it
// could, and the sandbox got ready on the claim's code before the message
// came back. Unrecorded, nothing could stop it (a kill, the sweep of a lost
// session). Launching the same session and generation again returns that
// sandbox and starts nothing (launch.Launcher), so no code is given.
func (w *Worker) recordLaunched(ctx context.Context, sess session.Session) error {
	spec := launch.Spec{
		SessionID:       sess.ID,
		Generation:      sess.Generation,
		GatewayURL:      w.GatewayURL,
		ModelGatewayURL: w.ModelGatewayURL,
		PushURL:         w.PushURL,
		TmuxSessionName: sess.TmuxSessionName,
		Size:            w.size(ctx, sess),
		Image:           baseImage(sess),
		Isolated:        sess.EgressPolicy().Isolated(),
		Offline:         sess.EgressPolicy().Offline(),
	}
	if sess.WorkspaceDropped != "" {
		// It was the last launch, without the workspace (launchBare).
		spec.Bare, spec.Size, spec.Image = true, tasksize.Size{}, ""
	}
	ref, err := w.Launcher.Launch(ctx, spec)
	if err != nil {
		return fmt.Errorf("find the unrecorded sandbox of %s: %w", sess.ID, err)
	}
	if err := w.record(ctx, sess.ID, sess.Generation, ref); ignoreConflict(err) != nil {
		return fmt.Errorf("record sandbox of %s: %w", sess.ID, err)
	}
	w.Log.WarnContext(ctx, "sandbox recorded after its launch's worker died", slog.String("session_id", sess.ID),
		slog.Int("generation", sess.Generation), slog.String("sandbox_ref", ref))
	return nil
}

// RecordRetry is how the worker retries recording a sandbox it launched. A
// failed record fails the message, which comes back only after the jobs
// queue's visibility timeout: meanwhile the agent may be ready on a sandbox
// no kill or sweep can find. An overloaded table's refusal passes in seconds.
var RecordRetry = retry.Policy{Attempts: 5, Base: 200 * time.Millisecond, Max: 3 * time.Second}

// record records ref as the sandbox of generation gen of session id,
// retrying by RecordRetry; session.ErrConflict (the session moved on) is
// not retried.
func (w *Worker) record(ctx context.Context, id string, gen int, ref string) error {
	return retry.Do(ctx, RecordRetry, func() error {
		_, err := w.Store.Touch(ctx, id, gen, session.Fields{SandboxRef: ref})
		if errors.Is(err, session.ErrConflict) {
			return retry.Permanent(err)
		}
		return err
	})
}

// size is the sandbox size of sess: a job's, what its memory constraint
// needs; else its agent type's resource limits as
// stored at create (defaults filled in), none without a type. Limits that no
// longer parse (stored before a rule changed) launch at the default size.
func (w *Worker) size(ctx context.Context, sess session.Session) tasksize.Size {
	if sess.JobID != "" && w.Jobs != nil {
		size, err := w.Jobs.Size(ctx, sess.JobID)
		if err != nil {
			w.Log.WarnContext(ctx, "size of the job's sandbox: default size", slog.String("job_id", sess.JobID), slog.String("error", err.Error()))
		}
		return size
	}
	if sess.Workspace == nil {
		return tasksize.Size{}
	}
	l := sess.Workspace.ResourceLimits
	size, err := tasksize.Parse(l.CPU, l.Memory, l.Disk)
	if err != nil {
		w.Log.WarnContext(ctx, "resource limits of the session do not parse: default size", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
		return tasksize.Size{}
	}
	return size
}

// baseImage is the image sess's sandbox runs: its agent type's base_image
// as stored at create ("" for the platform's: no workspace, a job).
func baseImage(sess session.Session) string {
	if sess.JobID != "" || sess.Workspace == nil || !sess.Workspace.Enabled {
		return ""
	}
	return sess.Workspace.BaseImage
}

// errLaunchFailed: every launch failed, and the session with them.
var errLaunchFailed = errors.New("launch failed")

// launch launches spec; a launch that fails is retried once on the
// launcher's fallback capacity (Fargate: the other capacity provider; a
// process: a second one). When that fails too, a session with a workspace
// is launched once more without it (the spec's degraded mode: the
// platform's image at the default size, no repository or setup; its
// workspace status says why), and when nothing could start the session
// fails (ReasonLaunchFailed: create answers a clear error) with
// errLaunchFailed. A worker whose own context ended (it is dying) retries
// nothing and leaves the session to the next delivery.
func (w *Worker) launch(ctx context.Context, sess session.Session, spec launch.Spec) (string, error) {
	ref, err := w.Launcher.Launch(ctx, spec)
	if err == nil || ctx.Err() != nil {
		return ref, err
	}
	if errors.Is(err, launch.ErrIsolationUnavailable) {
		return "", w.refuse(ctx, sess, spec, err)
	}
	w.Log.WarnContext(ctx, "launch failed: retrying on the fallback capacity", slog.String("session_id", sess.ID),
		slog.Int("generation", spec.Generation), slog.String("error", err.Error()))
	spec.Fallback = true
	ref, err2 := w.Launcher.Launch(ctx, spec)
	if err2 == nil || ctx.Err() != nil {
		return ref, err2
	}
	if sess.Workspace != nil && sess.Workspace.Enabled && sess.JobID == "" {
		ref, err3 := w.launchBare(ctx, sess, spec, err2)
		if err3 == nil || ctx.Err() != nil {
			return ref, err3
		}
		err2 = err3
	}
	w.Log.ErrorContext(ctx, "launch failed on the fallback capacity too: the session fails", slog.String("session_id", sess.ID),
		slog.Int("generation", spec.Generation), slog.String("error", err2.Error()))
	if terr := w.failStart(ctx, sess, spec.Generation, session.ReasonLaunchFailed); terr != nil {
		return "", fmt.Errorf("fail session %s after two failed launches: %w", sess.ID, terr)
	}
	return "", errLaunchFailed
}

// refuse fails sess, whose sandbox its launcher cannot cut off from the
// network as its egress policy asks (err): launched anyway it would run
// open, and no other capacity or retry changes that. A job's session
// fails its job as a policy violation first, saying so.
func (w *Worker) refuse(ctx context.Context, sess session.Session, spec launch.Spec, err error) error {
	w.Log.ErrorContext(ctx, "launch refused: the sandbox cannot be cut off from the network here, so the session fails", slog.String("session_id", sess.ID),
		slog.Int("generation", spec.Generation), slog.String("error", err.Error()))
	if sess.JobID != "" && w.Jobs != nil {
		why := err.Error()
		if _, after, ok := strings.Cut(why, launch.ErrIsolationUnavailable.Error()+": "); ok {
			why = after
		}
		if jerr := w.Jobs.IsolationUnavailable(ctx, sess.JobID, launchError(errors.New(why))); jerr != nil {
			return fmt.Errorf("fail job %s, whose sandbox cannot be isolated: %w", sess.JobID, jerr)
		}
	}
	if terr := w.failStart(ctx, sess, spec.Generation, session.ReasonLaunchFailed); terr != nil {
		return fmt.Errorf("fail session %s, whose sandbox cannot be isolated: %w", sess.ID, terr)
	}
	return errLaunchFailed
}

// failStart fails the start of generation gen of sess: a first start
// fails the session; a resume leaves it paused on its checkpoint, which is
// as whole as it was.
func (w *Worker) failStart(ctx context.Context, sess session.Session, gen int, reason session.Reason) error {
	c := session.Change{From: []session.State{session.Provisioning}, To: session.Failed, Generation: gen, Reason: reason}
	if sess.State == session.Resuming {
		c = session.Change{From: []session.State{session.Resuming}, To: session.Paused, Generation: gen, Reason: reason, Set: session.Fields{PausedAt: w.now()}}
	}
	_, err := w.Store.Transition(ctx, sess.ID, c)
	return ignoreConflict(err)
}

// launchBare launches sess's sandbox without its workspace, after its
// launches with it failed (last their error): the session records why
// first, so that its sandbox, whenever it asks, is served no workspace.
func (w *Worker) launchBare(ctx context.Context, sess session.Session, spec launch.Spec, last error) (string, error) {
	w.Log.ErrorContext(ctx, "launch with the workspace failed on the fallback capacity too: launching the agent without its workspace (degraded)",
		slog.String("session_id", sess.ID), slog.Int("generation", spec.Generation), slog.String("error", last.Error()))
	why := "the sandbox could not be launched with its workspace (" + launchError(last) + "): the agent runs without it, in an empty folder of the platform's image"
	if _, err := w.Store.Touch(ctx, sess.ID, spec.Generation, session.Fields{WorkspaceDropped: why}); err != nil {
		return "", fmt.Errorf("record the workspace of %s as dropped: %w", sess.ID, err)
	}
	spec.Bare, spec.Fallback, spec.Size, spec.Image = true, false, tasksize.Size{}, ""
	return w.Launcher.Launch(ctx, spec)
}

// launchError is a launch's error as a workspace warning says it: its
// first line, bounded.
func launchError(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > 300 {
		msg = strings.ToValidUTF8(msg[:300], "") + "…"
	}
	return msg
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// live returns the session m is about, if it is still live in m's generation.
func (w *Worker) live(ctx context.Context, m jobqueue.Message) (session.Session, bool, error) {
	sess, err := w.Store.Get(ctx, m.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return sess, false, nil
	}
	if err != nil {
		return sess, false, err
	}
	return sess, !sess.State.Terminal() && sess.Generation == m.Generation, nil
}

// expire ends a sandbox of the sandbox API whose end (m.At) came, as a
// kill does (no grace), or pauses it (AutoPause: its sandbox writes a
// checkpoint, then stops). An end that moved since is another message's; one
// still further off than a queue delays is sent on again.
func (w *Worker) expire(ctx context.Context, m jobqueue.Message) error {
	sess, err := w.Store.Get(ctx, m.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if sess.State.Terminal() || sess.EndsAt.UnixMilli() != m.At {
		return nil // over, or its end moved: the move sent its own
	}
	now := w.now()
	if !sess.Expired(now) {
		if w.Expiries == nil {
			return errors.New("session.expire too early on a worker that cannot send it again")
		}
		next, delay := jobqueue.ExpireAt(sess.ID, sess.Generation, sess.EndsAt, now)
		return w.Expiries.Publish(ctx, next, delay)
	}
	switch {
	case sess.State == session.Paused || sess.State == session.Pausing:
		return nil // paused already: its end is its pause
	case session.PausesAtEnd(sess) && w.Checkpoints != nil && slices.Contains(session.Running, sess.State):
		_, err := w.Store.Transition(ctx, sess.ID, session.Change{From: session.Running, To: session.Pausing, Generation: sess.Generation, Reason: session.ReasonTimeout})
		if errors.Is(err, session.ErrConflict) {
			return w.expire(ctx, m) // it moved meanwhile: look again
		}
		if err == nil {
			w.Log.InfoContext(ctx, "sandbox paused at its end", slog.String("session_id", sess.ID))
		}
		return err
	}
	ended, err := w.Store.Transition(ctx, sess.ID, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonTimeout})
	if errors.Is(err, session.ErrConflict) {
		return w.expire(ctx, m)
	}
	if err != nil {
		return err
	}
	w.Log.InfoContext(ctx, "sandbox ended at its end", slog.String("session_id", sess.ID))
	if ended.SandboxRef != "" {
		if err := w.Launcher.Stop(ctx, ended.SandboxRef, 0); err != nil {
			return fmt.Errorf("stop the sandbox of %s at its end: %w", sess.ID, err)
		}
	}
	w.forget(ctx, ended)
	return nil
}

// stop stops the sandbox of m's generation for good, even when its session has
// already ended (a lost sandbox may still be running), and ends a live session.
func (w *Worker) stop(ctx context.Context, m jobqueue.Message) error {
	sess, live, err := w.live(ctx, m)
	if err != nil || sess.Generation != m.Generation {
		return err
	}
	if sess.SandboxRef != "" {
		grace := stopGrace
		if sess.Reason == session.ReasonKilled {
			grace = 0 // killed: no grace
		}
		if err := w.Launcher.Stop(ctx, sess.SandboxRef, grace); err != nil {
			return fmt.Errorf("stop sandbox of %s: %w", sess.ID, err)
		}
	}
	if sess.State == session.Paused {
		return nil // a paused session's sandbox stops; the session lives on
	}
	if !live {
		w.forget(ctx, sess)
		return nil
	}
	reason := sess.Reason
	if reason == "" {
		reason = session.ReasonShutdown
	}
	if err := w.end(ctx, sess, reason); err != nil {
		return err
	}
	sess.State = session.Ended
	w.forget(ctx, sess)
	return nil
}

// sweep replenishes the warm pool, then runs one sweep and stops, with no grace, the sandboxes of the
// sessions it ended. A failed sweep is retried with its message, and the next
// scheduled one goes on anyway; a sandbox whose stop fails here is told to
// stop by its next heartbeat or inbox read (its session is over).
func (w *Worker) sweep(ctx context.Context) error {
	if w.Pool != nil {
		prep, err := w.Pool.Replenish(ctx)
		if err != nil {
			w.Log.WarnContext(ctx, "pool: replenish", slog.String("error", err.Error()))
		} else if prep.Launched+prep.Retired+prep.Lost > 0 {
			w.Log.InfoContext(ctx, "pool replenished", slog.Int("launched", prep.Launched), slog.Int("retired", prep.Retired), slog.Int("lost", prep.Lost))
		}
	}
	if w.Sweeper == nil {
		return nil
	}
	rep, err := w.Sweeper.Sweep(ctx)
	if rep.Lost+rep.Stuck+rep.Ended > 0 {
		w.Log.InfoContext(ctx, "sweep", slog.Int("checked", rep.Checked), slog.Int("lost", rep.Lost), slog.Int("stuck_provisioning", rep.Stuck), slog.Int("stuck_ending", rep.Ended))
	}
	for _, sess := range rep.Stop {
		w.forget(ctx, sess)
		if sess.SandboxRef == "" {
			continue
		}
		if err := w.Launcher.Stop(ctx, sess.SandboxRef, 0); err != nil {
			w.Log.WarnContext(ctx, "sweep: stop sandbox", slog.String("session_id", sess.ID), slog.String("sandbox_ref", sess.SandboxRef), slog.String("error", err.Error()))
		}
	}
	return err
}

func (w *Worker) taskStopped(ctx context.Context, m jobqueue.Message) error {
	if pool.IsID(m.SessionID) {
		return w.poolSandboxStopped(ctx, m)
	}
	sess, live, err := w.live(ctx, m)
	if !live || err != nil {
		if err == nil && sess.Generation == m.Generation {
			w.forget(ctx, sess) // it ended itself, then stopped
		}
		return err
	}
	switch sess.State {
	case session.Paused:
		return nil // stopped as its pause asked
	case session.Pausing, session.Resuming:
		return w.pauseInterrupted(ctx, sess)
	}
	reason := session.ReasonCrashed
	if sess.State == session.Ending {
		reason = session.ReasonShutdown
	}
	if slices.Contains(session.Running, sess.State) && sess.CheckpointID != "" && sess.JobID == "" {
		// Crashed with a checkpoint: paused on it, resumable.
		c := session.LostChange(sess, w.now())
		c.Reason = session.ReasonCrashed
		_, err := w.Store.Transition(ctx, sess.ID, c)
		return ignoreConflict(err)
	}
	if sess.State == session.Provisioning {
		_, err := w.Store.Transition(ctx, sess.ID, session.Change{From: []session.State{session.Provisioning}, To: session.Failed, Generation: sess.Generation, Reason: session.ReasonError})
		if err = ignoreConflict(err); err != nil {
			return err
		}
		return w.jobCrashed(ctx, sess, "The job's sandbox stopped before it reported.")
	}
	if err := w.end(ctx, sess, reason); err != nil {
		return err
	}
	if ended, err := w.Store.Get(ctx, sess.ID); err == nil {
		w.forget(ctx, ended)
	}
	if launch.OutOfMemory(m.Detail) && sess.JobID != "" && w.Jobs != nil {
		return w.Jobs.OutOfMemory(ctx, sess.JobID, "The job's sandbox was killed for its memory: it used all its memory limit (constraints.memory).")
	}
	return w.jobCrashed(ctx, sess, "The job's sandbox stopped without reporting the job's end.")
}

// pauseInterrupted handles the stop of the sandbox of a session pausing
// (killed before its checkpoint was committed) or resuming (before it was
// ready): the session is paused on its last committed checkpoint, whole
// whatever the kill interrupted; one that has none ends (crashed).
func (w *Worker) pauseInterrupted(ctx context.Context, sess session.Session) error {
	if sess.CheckpointID == "" {
		return w.end(ctx, sess, session.ReasonCrashed)
	}
	_, err := w.Store.Transition(ctx, sess.ID, session.Change{From: []session.State{sess.State}, To: session.Paused, Generation: sess.Generation,
		Reason: session.ReasonCrashed, Set: session.Fields{PausedAt: w.now()}})
	return ignoreConflict(err)
}

// recordAddress records where a running sandbox task is: the egress proxy
// knows its connections by it, and the sandbox proxy reaches it there.
func (w *Worker) recordAddress(ctx context.Context, m jobqueue.Message) error {
	addr, err := netip.ParseAddr(m.Addr)
	if w.Addresses == nil || err != nil {
		return nil
	}
	return w.Addresses.Record(ctx, launch.Address{Addr: addr, Sandbox: m.SessionID, Ref: m.SandboxRef}, w.now().Add(AddressLife))
}

// forgetAddress removes a stopped task's address record, if it is still
// that task's.
func (w *Worker) forgetAddress(ctx context.Context, m jobqueue.Message) error {
	addr, err := netip.ParseAddr(m.Addr)
	if w.Addresses == nil || err != nil {
		return nil
	}
	return w.Addresses.Forget(ctx, launch.Address{Addr: addr, Sandbox: m.SessionID, Ref: m.SandboxRef})
}

// poolSandboxStopped handles the stop of a pool sandbox: one that a session
// claimed stopped as that session's sandbox (m is for its generation); one
// never claimed is forgotten by the pool.
func (w *Worker) poolSandboxStopped(ctx context.Context, m jobqueue.Message) error {
	if w.Pool == nil {
		return nil
	}
	id, err := w.Pool.Exited(ctx, m.SessionID)
	if err != nil || id == "" {
		return err
	}
	sess, err := w.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil || sess.PoolSandbox != m.SessionID {
		return err
	}
	m.SessionID, m.Generation = sess.ID, sess.Generation
	return w.taskStopped(ctx, m)
}

// jobCrashed fails the job of a job's sandbox that stopped without
// reporting its end (a job already over stays as it is).
func (w *Worker) jobCrashed(ctx context.Context, sess session.Session, msg string) error {
	if sess.JobID == "" || w.Jobs == nil {
		return nil
	}
	return w.Jobs.Crashed(ctx, sess.JobID, msg)
}

// runJob launches the sandbox of an orchestrator job: the job gets its
// session once, whose launch is claimed once (start), so a redelivered
// job.run launches nothing more. A job whose sandbox cannot be launched
// fails (crash).
func (w *Worker) runJob(ctx context.Context, m jobqueue.Message) error {
	if w.Jobs == nil {
		return errors.New("job.run on a worker without jobs")
	}
	sid, run, err := w.Jobs.Prepare(ctx, m.JobID)
	if err != nil || !run {
		return err
	}
	if err := w.start(ctx, jobqueue.Message{Type: jobqueue.SessionStart, SessionID: sid, Generation: 1}); err != nil {
		return err
	}
	sess, err := w.Store.Get(ctx, sid)
	if err != nil {
		return err
	}
	if sess.State.Terminal() {
		return w.jobCrashed(ctx, sess, "The job's sandbox could not be launched.")
	}
	return nil
}

// cancelJob stops the sandbox of a cancelled job.
func (w *Worker) cancelJob(ctx context.Context, m jobqueue.Message) error {
	if w.Jobs == nil {
		return errors.New("job.cancel on a worker without jobs")
	}
	sid, err := w.Jobs.SessionOf(ctx, m.JobID)
	if err != nil || sid == "" {
		return err
	}
	sess, err := w.Store.Get(ctx, sid)
	if errors.Is(err, session.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return w.stop(ctx, jobqueue.Message{Type: jobqueue.SessionStop, SessionID: sid, Generation: sess.Generation})
}

func (w *Worker) end(ctx context.Context, sess session.Session, reason session.Reason) error {
	from := slices.DeleteFunc(slices.Clone(session.Live), func(s session.State) bool { return s == session.Provisioning })
	to := session.Ended
	if sess.State == session.Provisioning {
		from, to = []session.State{session.Provisioning}, session.Failed
	}
	_, err := w.Store.Transition(ctx, sess.ID, session.Change{From: from, To: to, Generation: sess.Generation, Reason: reason})
	return ignoreConflict(err)
}

// ignoreConflict: a session that moved on meanwhile needs nothing more from us.
func ignoreConflict(err error) error {
	if errors.Is(err, session.ErrConflict) {
		return nil
	}
	return err
}
