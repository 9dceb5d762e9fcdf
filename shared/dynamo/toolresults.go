package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/session"
)

var _ session.ToolResults = (*ToolResults)(nil)

// ToolResults stores the results of workspace tool requests in the
// idempotency table, next to the requests' own records (their keys start
// "wstool-result#", the requests' "wstool#").
type ToolResults struct {
	t *Table
}

// NewToolResults returns the workspace tool result store in the idempotency
// table.
func NewToolResults(api API, idempotencyTable string) *ToolResults {
	return &ToolResults{t: NewTable(api, idempotencyTable)}
}

// Record stores r unless a result has its key.
func (s *ToolResults) Record(ctx context.Context, r session.ToolResultRecord) (bool, error) {
	err := s.t.Put(ctx, r, expression.AttributeNotExists(expression.Name("key")))
	if errors.Is(err, ErrConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record workspace tool result: %w", err)
	}
	return true, nil
}

// Result reads the result with key.
func (s *ToolResults) Result(ctx context.Context, key string) (session.ToolResultRecord, error) {
	var out session.ToolResultRecord
	err := s.t.Get(ctx, map[string]string{"key": key}, &out)
	if errors.Is(err, ErrNotFound) {
		return out, fmt.Errorf("%s: %w", key, session.ErrNotFound)
	}
	return out, err
}
