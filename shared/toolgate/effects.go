package toolgate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Limits of the tools' side effects.
const (
	// MaxVerifyFiles bounds the files one verify records.
	MaxVerifyFiles = 200
	// SnapshotObject is the name of the archive save_snapshot uploads.
	SnapshotObject = sandboxwire.SnapshotObject
)

// RunCompletion is an automation run's recorded outcome. Runs are a
// session's: run ids of different sessions (of one tenant or not) never
// meet.
type RunCompletion struct {
	Tenant          string    `json:"tenant"`
	RunID           string    `json:"run_id"`
	CompletionID    string    `json:"completion_id"`
	Outcome         string    `json:"outcome"`
	SessionID       string    `json:"session_id"`
	SummaryMarkdown string    `json:"summary_markdown,omitempty"`
	Citations       []string  `json:"citations,omitempty"`
	DiffRef         string    `json:"diff_ref,omitempty"`
	TestReportRef   string    `json:"test_report_ref,omitempty"`
	SideEffectRefs  []string  `json:"side_effect_refs,omitempty"`
	CompletedAt     time.Time `json:"completed_at"`
}

// Runs records automation run outcomes.
type Runs interface {
	// Complete records c unless c.Tenant's run c.RunID already has a
	// completion; it returns the completion the run has after the call.
	Complete(ctx context.Context, c RunCompletion) (RunCompletion, error)
}

// SessionWrites is what the contract tools write to their session: the
// snapshot key (session.Lifecycle's Touch) and the events they add, once per
// call (session.EventLog's AppendOnce).
type SessionWrites interface {
	// Touch sets fields on a live session of the given generation;
	// session.ErrConflict otherwise.
	Touch(ctx context.Context, id string, generation int, set session.Fields) (session.Session, error)
	// AppendOnce appends e with its idempotency record;
	// session.ErrIdempotencyTaken if the record's key is used.
	AppendOnce(ctx context.Context, id string, generation int, events []session.Event, rec session.IdempotencyRecord) ([]session.Event, error)
}

// Effects is the Executor of the contract tools: it writes to the object store,
// the registry's configurations, the runs and the session's events.
type Effects struct {
	Blob     blob.Store
	Registry registry.Store
	Sessions SessionWrites
	Runs     Runs
	Now      func() time.Time
}

var _ Executor = (*Effects)(nil)

// Execute runs one call.
func (e *Effects) Execute(ctx context.Context, c Call) (Result, error) {
	switch a := c.Args.(type) {
	case toolspec.VerifyArgs:
		return e.verify(ctx, c, a)
	case toolspec.SnapshotArgs:
		return e.snapshot(ctx, c, a)
	case toolspec.CompleteArgs:
		return e.complete(ctx, c, a)
	case toolspec.ServiceCommandsArgs:
		return e.serviceCommands(ctx, c, a)
	case toolspec.EnvFilesArgs:
		return e.envFiles(ctx, c, a)
	}
	return Result{}, fmt.Errorf("no effects for %s (%T)", c.Tool, c.Args)
}

// eventKey is the key of the idempotency record of the output event of the
// call whose record key is recordKey (RecordKey).
func eventKey(recordKey string) string {
	return "toolevent#" + strings.TrimPrefix(recordKey, "tool#")
}

func (e *Effects) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// verify records the files the sandbox uploaded for this call as session outputs.
func (e *Effects) verify(ctx context.Context, c Call, a toolspec.VerifyArgs) (Result, error) {
	prefix := toolspec.UploadPrefix(c.Session.ID, c.Tool, c.CallID)
	var files []sandboxwire.VerifiedFile
	var total int64
	after := ""
	for {
		page, err := e.Blob.List(ctx, prefix, after, blob.MaxListSize)
		if err != nil {
			return Result{}, err
		}
		for _, o := range page.Objects {
			if len(files) == MaxVerifyFiles {
				break
			}
			files = append(files, sandboxwire.VerifiedFile{Path: strings.TrimPrefix(o.Key, prefix), Key: o.Key, SizeBytes: o.Size})
			total += o.Size
		}
		if page.Next == "" || len(files) == MaxVerifyFiles {
			break
		}
		after = page.Next
	}
	if len(files) == 0 {
		return Result{Success: false, Result: fmt.Sprintf("No verification files were uploaded from %s; put the evidence there and call verify again.", a.Folder)}, nil
	}
	out := sandboxwire.OutputVerification{Tool: c.Tool, ToolCallID: c.CallID, Folder: a.Folder, Prefix: prefix, Files: files, FileCount: len(files), TotalBytes: total}
	data, err := e.event(ctx, c, out)
	if err != nil {
		return Result{}, err
	}
	return Result{Success: true, Result: fmt.Sprintf("Uploaded %d verification file(s) from %s.", len(files), a.Folder), Data: data}, nil
}

// snapshot keeps the archive the sandbox uploaded for this call: as the
// configuration's snapshot in a setup session, as the session's otherwise.
func (e *Effects) snapshot(ctx context.Context, c Call, a toolspec.SnapshotArgs) (Result, error) {
	staged := toolspec.UploadPrefix(c.Session.ID, c.Tool, c.CallID) + SnapshotObject
	page, err := e.Blob.List(ctx, staged, "", 1)
	if err != nil {
		return Result{}, err
	}
	if len(page.Objects) == 0 || page.Objects[0].Key != staged {
		return Result{Success: false, Result: "The workspace archive was not uploaded; call save_snapshot again."}, nil
	}
	size := page.Objects[0].Size
	target, owner := "session", c.Session.ID
	if c.Session.ConfigurationID != "" && c.Session.SessionType == "setup" {
		target, owner = "configuration", c.Session.ConfigurationID
	}
	key := "snapshots/" + target + "/" + owner + "/" + strings.TrimPrefix(c.Key, "tool#") + ".tar.gz"
	if err := e.Blob.Copy(ctx, staged, key); err != nil {
		return Result{}, err
	}
	now := e.now()
	snap := registry.Snapshot{Key: key, SizeBytes: size, Message: a.Message, SessionID: c.Session.ID, SavedAt: now.UTC()}
	if target == "configuration" {
		if err := e.Registry.UpdateConfiguration(ctx, c.Session.Tenant, owner, registry.ConfigurationUpdate{Snapshot: &snap, UpdatedAt: now}); err != nil {
			return configFailure(err)
		}
	} else if _, err := e.Sessions.Touch(ctx, c.Session.ID, c.Session.Generation, session.Fields{SnapshotKey: key}); err != nil && !errors.Is(err, session.ErrConflict) {
		return Result{}, err
	}
	data, err := e.event(ctx, c, sandboxwire.OutputSnapshot{Tool: c.Tool, ToolCallID: c.CallID, SnapshotKey: key, Target: target, SizeBytes: size})
	if err != nil {
		return Result{}, err
	}
	return Result{Success: true, Result: fmt.Sprintf("Snapshot saved (%d bytes) for this %s.", size, target), Data: data}, nil
}

func (e *Effects) complete(ctx context.Context, c Call, a toolspec.CompleteArgs) (Result, error) {
	if c.Session.Tenant == "" {
		// A session of no tenant (created before tenants) has no runs to complete.
		return Result{Success: false, Result: "This session belongs to no app's tenant: it cannot complete automation runs."}, nil
	}
	got, err := e.Runs.Complete(ctx, RunCompletion{
		Tenant: c.Session.Tenant, RunID: a.RunID, CompletionID: a.CompletionID, Outcome: a.Outcome, SessionID: c.Session.ID,
		SummaryMarkdown: a.SummaryMarkdown, Citations: a.Citations, DiffRef: a.DiffRef,
		TestReportRef: a.TestReportRef, SideEffectRefs: a.SideEffectRefs,
		CompletedAt: e.now().UTC(),
	})
	if err != nil {
		return Result{}, err
	}
	done := sandboxwire.AutomationCompleted{Tool: c.Tool, ToolCallID: c.CallID, RunID: got.RunID, CompletionID: got.CompletionID, Outcome: got.Outcome}
	if got.CompletionID != a.CompletionID {
		return Result{Success: false, Result: fmt.Sprintf("Run %s was already completed (outcome %s) by another completion.", a.RunID, got.Outcome),
			Data: map[string]any{"run_id": got.RunID, "completion_id": got.CompletionID, "outcome": got.Outcome}}, nil
	}
	data, err := e.event(ctx, c, done)
	if err != nil {
		return Result{}, err
	}
	return Result{Success: true, Result: fmt.Sprintf("Run %s completed: %s.", a.RunID, a.Outcome), Data: data}, nil
}

func (e *Effects) serviceCommands(ctx context.Context, c Call, a toolspec.ServiceCommandsArgs) (Result, error) {
	if err := e.updateConfiguration(ctx, c, registry.ConfigurationUpdate{ServiceCommands: a.Commands}); err != nil {
		return configFailure(err)
	}
	return Result{Success: true, Result: fmt.Sprintf("Saved %d service command(s) for future sessions.", len(a.Commands)),
		Data: map[string]any{"configuration_id": c.Session.ConfigurationID, "command_count": len(a.Commands)}}, nil
}

func (e *Effects) envFiles(ctx context.Context, c Call, a toolspec.EnvFilesArgs) (Result, error) {
	if err := e.updateConfiguration(ctx, c, registry.ConfigurationUpdate{EnvFiles: a.Files}); err != nil {
		return configFailure(err)
	}
	return Result{Success: true, Result: fmt.Sprintf("Saved the spec of %d env file(s) for future sessions.", len(a.Files)),
		Data: map[string]any{"configuration_id": c.Session.ConfigurationID, "file_count": len(a.Files)}}, nil
}

var errNoConfiguration = errors.New("no configuration")

func (e *Effects) updateConfiguration(ctx context.Context, c Call, u registry.ConfigurationUpdate) error {
	if c.Session.ConfigurationID == "" {
		return errNoConfiguration
	}
	u.UpdatedAt = e.now()
	return e.Registry.UpdateConfiguration(ctx, c.Session.Tenant, c.Session.ConfigurationID, u)
}

func configFailure(err error) (Result, error) {
	if errors.Is(err, errNoConfiguration) || errors.Is(err, registry.ErrNotFound) {
		return Result{Success: false, Result: "This session has no configuration to save to."}, nil
	}
	return Result{}, err
}

// event appends an output event of the call's session (none once the session
// has ended), once per call: the attempt that runs the call again after one
// that died between appending it and completing its record (the lease ran
// out) appends nothing more. It returns the event's data without the call's
// own fields, for the result.
func (e *Effects) event(ctx context.Context, c Call, p sandboxwire.Payload) (map[string]any, error) {
	ev, err := session.NewEvent(p)
	if err != nil {
		return nil, err
	}
	now := e.now().UTC()
	once := session.IdempotencyRecord{
		Key:         eventKey(c.Key),
		SessionID:   c.Session.ID,
		RequestHash: ev.Type,
		CreatedAt:   now,
		// As long as an unfinished call's record: its attempts come within.
		ExpiresAt: now.Add(inProgressTTL).Unix(),
	}
	_, err = e.Sessions.AppendOnce(ctx, c.Session.ID, c.Session.Generation, []session.Event{ev}, once)
	if err != nil && !errors.Is(err, session.ErrConflict) && !errors.Is(err, session.ErrIdempotencyTaken) {
		return nil, err
	}
	data := maps.Clone(ev.Data)
	delete(data, "tool")
	delete(data, "tool_call_id")
	return data, nil
}
