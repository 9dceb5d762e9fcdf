package toolgate

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// State is where a call's record is.
type State string

// The states of a record.
const (
	InProgress State = "in_progress"
	Completed  State = "completed"
)

// Phase says who holds an in-progress call.
type Phase string

// The phases of an in-progress call.
const (
	// Handler: a callback request runs it, until LeaseUntil (its deadline).
	Handler Phase = "handler"
	// Queued: it waits on the tools queue for jobworker.
	Queued Phase = "queued"
	// Worker: jobworker runs it, until LeaseUntil.
	Worker Phase = "worker"
)

// Record is the durable state of one tool call: one per session, tool and key.
type Record struct {
	Key       string `json:"key"`
	SessionID string `json:"session_id"`
	Tool      string `json:"tool"`
	// CallID is the idempotency key as the sandbox sent it (tool_call_id, or
	// completion_id for automation.complete).
	CallID string `json:"call_id"`
	// PayloadHash is the SHA-256 of the tool and its canonical arguments.
	PayloadHash string          `json:"payload_hash"`
	Args        json.RawMessage `json:"args"`
	State       State           `json:"state"`
	Phase       Phase           `json:"phase,omitempty"`
	// Attempt counts the runs started; only the holder of the current attempt
	// may complete the record.
	Attempt int `json:"attempt"`
	// LeaseUntil (epoch ms) is when an in-progress run counts as crashed.
	LeaseUntil  int64     `json:"lease_until"`
	Result      *Result   `json:"result,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	CompletedAt time.Time `json:"completed_at,omitempty,omitzero"`
	// ExpiresAt (epoch seconds) is when TTL removes the record; a record past it
	// counts as absent even before TTL gets to it.
	ExpiresAt int64 `json:"expires_at"`
}

// Expired reports whether the record is past its retention.
func (r Record) Expired(now time.Time) bool { return r.ExpiresAt <= now.Unix() }

// LeaseExpired reports whether an in-progress run's holder counts as crashed.
func (r Record) LeaseExpired(now time.Time) bool { return r.LeaseUntil <= now.UnixMilli() }

// Result is what a tool call returns to the sandbox.
type Result struct {
	Success bool           `json:"success"`
	Result  string         `json:"result"`
	Data    map[string]any `json:"data,omitempty"`
}

// Errors of a Store.
var (
	// ErrNotFound: no record has the key.
	ErrNotFound = errors.New("tool call record not found")
	// ErrConflict: the record was not in the state the write required.
	ErrConflict = errors.New("tool call record changed")
)

// Store keeps the records with conditional writes.
type Store interface {
	// Begin writes rec unless a record that has not expired at now has its key;
	// then it returns that record and false.
	Begin(ctx context.Context, rec Record, now time.Time) (Record, bool, error)
	// Get reads a record, strongly consistent; ErrNotFound if absent. It may
	// return an expired record (TTL is lazy): check Expired.
	Get(ctx context.Context, key string) (Record, error)
	// TakeOver starts a new attempt of an in-progress record whose attempt is
	// seen and whose lease expired at now, held by phase until leaseUntil.
	// ErrConflict otherwise.
	TakeOver(ctx context.Context, key string, seen int, now time.Time, phase Phase, leaseUntil int64) (Record, error)
	// Hold moves the in-progress attempt to phase, held until leaseUntil. With
	// onlyIf set, the record must be in one of those phases or its lease must
	// have expired at now. ErrConflict otherwise.
	Hold(ctx context.Context, key string, attempt int, now time.Time, phase Phase, leaseUntil int64, onlyIf ...Phase) error
	// Complete stores the result of the in-progress attempt; ErrConflict if the
	// record moved on to another attempt or completed.
	Complete(ctx context.Context, key string, attempt int, res Result, completedAt time.Time, expiresAt int64) error
}
