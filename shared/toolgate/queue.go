package toolgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// JobType is the type of a tools-queue message.
const JobType = "tool.run"

// Job is a tools-queue message: run attempt Attempt of the call recorded under Key.
type Job struct {
	Type    string `json:"type"`
	Key     string `json:"key"`
	Attempt int    `json:"attempt"`
}

// Errors of RunQueued.
var (
	// ErrMalformed: a message that can never be handled (poison).
	ErrMalformed = errors.New("malformed tool job")
	// ErrBusy: another worker holds the call; try again after it.
	ErrBusy = errors.New("tool call is held by another worker")
)

// IsJob reports whether a queue message body is a tool job.
func IsJob(body string) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal([]byte(body), &probe) == nil && probe.Type == JobType
}

// ParseJob decodes and checks a tool job.
func ParseJob(body string) (Job, error) {
	var j Job
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if j.Type != JobType || !strings.HasPrefix(j.Key, "tool#") || len(j.Key) != len("tool#")+64 || j.Attempt < 1 {
		return j, fmt.Errorf("%w: %q", ErrMalformed, body)
	}
	return j, nil
}

// enqueue hands the held attempt to jobworker.
func (s *Service) enqueue(ctx context.Context, rec Record) error {
	body, err := json.Marshal(Job{Type: JobType, Key: rec.Key, Attempt: rec.Attempt})
	if err != nil {
		return fmt.Errorf("encode tool job: %w", err)
	}
	if err := s.o.Records.Hold(ctx, rec.Key, rec.Attempt, s.o.Now(), Queued, rec.LeaseUntil); err != nil {
		return fmt.Errorf("queue tool call: %w", err)
	}
	if _, err := s.o.Queue.Send(ctx, string(body), 0); err != nil {
		call := Call{Key: rec.Key, CallID: rec.CallID, Tool: rec.Tool}
		s.release(call, rec.Attempt)
		s.o.Log.ErrorContext(ctx, "enqueue tool call", slog.String("tool_call_id", rec.CallID), slog.String("error", err.Error()))
		return &apierror.Error{Code: apierror.ServiceUnavailable, Message: "The tool could not be queued; retry with the same tool_call_id.", RetryAfter: 1}
	}
	return nil
}

// RunQueued runs a tools-queue job (jobworker). A nil error means the job is done
// or needs nothing (completed, superseded by a later attempt, expired); ErrBusy and
// other errors ask for redelivery; ErrMalformed is poison.
func (s *Service) RunQueued(ctx context.Context, body string) error {
	job, err := ParseJob(body)
	if err != nil {
		return err
	}
	rec, err := s.o.Records.Get(ctx, job.Key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	now := s.o.Now()
	if rec.Expired(now) || rec.State == Completed || rec.Attempt != job.Attempt {
		return nil
	}
	// The worker holds the call until its own deadline (the function's timeout).
	lease := now.Add(s.o.WorkerLease)
	if d, ok := ctx.Deadline(); ok {
		lease = d
	}
	err = s.o.Records.Hold(ctx, job.Key, job.Attempt, now, Worker, lease.UnixMilli(), Queued)
	if errors.Is(err, ErrConflict) {
		cur, gerr := s.o.Records.Get(ctx, job.Key)
		if gerr == nil && cur.State == InProgress && cur.Attempt == job.Attempt {
			return ErrBusy
		}
		return nil
	}
	if err != nil {
		return err
	}
	sess, err := s.o.Sessions.Get(ctx, rec.SessionID)
	if err != nil {
		return fmt.Errorf("tool job %s: %w", rec.Tool, err)
	}
	args, err := toolspec.Parse(rec.Tool, rec.Args)
	if err != nil {
		return fmt.Errorf("%w: stored arguments: %w", ErrMalformed, err)
	}
	_, err = s.complete(ctx, Call{Session: sess, Tool: rec.Tool, CallID: rec.CallID, Key: rec.Key, Args: args}, job.Attempt)
	return err
}
