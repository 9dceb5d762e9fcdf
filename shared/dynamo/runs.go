package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/toolgate"
)

var _ toolgate.Runs = (*Runs)(nil)

// Runs stores automation run completions in the jobs table, one item per run
// (job_id "run#<run_id>", sk "completion").
type Runs struct {
	t *Table
}

// NewRuns returns the run store in the jobs table.
func NewRuns(api API, jobsTable string) *Runs {
	return &Runs{t: NewTable(api, jobsTable)}
}

type runItem struct {
	JobID string `json:"job_id"`
	SK    string `json:"sk"`
	toolgate.RunCompletion
}

// Complete records c unless the run has another completion already.
func (r *Runs) Complete(ctx context.Context, c toolgate.RunCompletion) (toolgate.RunCompletion, error) {
	item := runItem{JobID: "run#" + c.RunID, SK: "completion", RunCompletion: c}
	err := r.t.Put(ctx, item, expression.Or(
		expression.AttributeNotExists(expression.Name("job_id")),
		expression.Name("completion_id").Equal(expression.Value(c.CompletionID)),
	))
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		var cur runItem
		if derr := cf.Decode(&cur); derr != nil {
			return toolgate.RunCompletion{}, fmt.Errorf("run %s: %w", c.RunID, derr)
		}
		return cur.RunCompletion, nil
	}
	if err != nil {
		return toolgate.RunCompletion{}, err
	}
	return c, nil
}
