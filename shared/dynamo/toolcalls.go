package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/toolgate"
)

var _ toolgate.Store = (*ToolCalls)(nil)

// ToolCalls stores tool call records in the idempotency table, next to the
// create records (their keys start "tool#", theirs "create#").
type ToolCalls struct {
	t *Table
}

// NewToolCalls returns the tool call store in the idempotency table.
func NewToolCalls(api API, idempotencyTable string) *ToolCalls {
	return &ToolCalls{t: NewTable(api, idempotencyTable)}
}

func recKey(key string) map[string]string { return map[string]string{"key": key} }

var (
	nKey        = expression.Name("key")
	nState      = expression.Name("state")
	nAttempt    = expression.Name("attempt")
	nLeaseUntil = expression.Name("lease_until")
	nPhase      = expression.Name("phase")
	nExpiresAt  = expression.Name("expires_at")
)

// Begin writes rec unless a live record has its key.
func (s *ToolCalls) Begin(ctx context.Context, rec toolgate.Record, now time.Time) (toolgate.Record, bool, error) {
	err := s.t.Put(ctx, rec, expression.Or(
		expression.AttributeNotExists(nKey),
		nExpiresAt.LessThanEqual(expression.Value(now.Unix())),
	))
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		var cur toolgate.Record
		if derr := cf.Decode(&cur); derr == nil {
			return cur, false, nil
		}
		// Gone between the write and the read of the failure: look again.
		cur, gerr := s.Get(ctx, rec.Key)
		return cur, false, gerr
	}
	if err != nil {
		return toolgate.Record{}, false, err
	}
	return rec, true, nil
}

// Get reads a record, expired or not.
func (s *ToolCalls) Get(ctx context.Context, key string) (toolgate.Record, error) {
	var out toolgate.Record
	err := s.t.Get(ctx, recKey(key), &out)
	if errors.Is(err, ErrNotFound) {
		return toolgate.Record{}, fmt.Errorf("%s: %w", key, toolgate.ErrNotFound)
	}
	return out, err
}

// TakeOver starts the next attempt of an in-progress record whose lease ran out.
func (s *ToolCalls) TakeOver(ctx context.Context, key string, seen int, now time.Time, phase toolgate.Phase, leaseUntil int64) (toolgate.Record, error) {
	up := expression.Set(nAttempt, expression.Value(seen+1)).
		Set(nPhase, expression.Value(phase)).
		Set(nLeaseUntil, expression.Value(leaseUntil))
	cond := nState.Equal(expression.Value(toolgate.InProgress)).
		And(nAttempt.Equal(expression.Value(seen))).
		And(nLeaseUntil.LessThanEqual(expression.Value(now.UnixMilli())))
	var out toolgate.Record
	if err := s.t.Update(ctx, recKey(key), up, &out, cond, expression.AttributeExists(nKey)); err != nil {
		return toolgate.Record{}, conflict(err)
	}
	return out, nil
}

// Hold moves the in-progress attempt to phase until leaseUntil.
func (s *ToolCalls) Hold(ctx context.Context, key string, attempt int, now time.Time, phase toolgate.Phase, leaseUntil int64, onlyIf ...toolgate.Phase) error {
	up := expression.Set(nPhase, expression.Value(phase)).Set(nLeaseUntil, expression.Value(leaseUntil))
	cond := nState.Equal(expression.Value(toolgate.InProgress)).And(nAttempt.Equal(expression.Value(attempt)))
	if len(onlyIf) > 0 {
		either := nLeaseUntil.LessThanEqual(expression.Value(now.UnixMilli()))
		for _, p := range onlyIf {
			either = either.Or(nPhase.Equal(expression.Value(p)))
		}
		cond = cond.And(either)
	}
	return conflict(s.t.Update(ctx, recKey(key), up, nil, cond, expression.AttributeExists(nKey)))
}

// Complete stores the result of the current attempt.
func (s *ToolCalls) Complete(ctx context.Context, key string, attempt int, res toolgate.Result, completedAt time.Time, expiresAt int64) error {
	up := expression.Set(nState, expression.Value(toolgate.Completed)).
		Set(expression.Name("result"), Value(res)).
		Set(expression.Name("completed_at"), expression.Value(completedAt.UTC().Format(time.RFC3339Nano))).
		Set(nExpiresAt, expression.Value(expiresAt)).
		Remove(nPhase)
	cond := nState.Equal(expression.Value(toolgate.InProgress)).And(nAttempt.Equal(expression.Value(attempt)))
	return conflict(s.t.Update(ctx, recKey(key), up, nil, cond, expression.AttributeExists(nKey)))
}

func conflict(err error) error {
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("%w: %w", toolgate.ErrConflict, err)
	}
	return err
}
