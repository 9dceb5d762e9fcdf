package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/toolgate"
)

var _ toolgate.Runs = (*Runs)(nil)

// Runs stores automation run completions in the jobs table, one item per run
// of a session (job_id "run#<tenant>#<session_id>#<run_id>", sk
// "completion"): a run id names a different run in each session, so that
// another session, of the tenant or not, neither reads nor completes nor
// pre-empts it.
type Runs struct {
	t *Table
}

// NewRuns returns the run store in the jobs table.
func NewRuns(api API, jobsTable string) *Runs {
	return &Runs{t: NewTable(api, jobsTable)}
}

// runKeyPrefix starts the job_id of every run item.
const runKeyPrefix = "run#"

type runItem struct {
	JobID string `json:"job_id"`
	SK    string `json:"sk"`
	toolgate.RunCompletion
}

// Complete records c unless the run has another completion already.
func (r *Runs) Complete(ctx context.Context, c toolgate.RunCompletion) (toolgate.RunCompletion, error) {
	if err := registry.ValidTenant(c.Tenant); err != nil {
		return toolgate.RunCompletion{}, fmt.Errorf("run %s: %w", c.RunID, err)
	}
	if c.SessionID == "" || strings.Contains(c.SessionID, "#") {
		return toolgate.RunCompletion{}, fmt.Errorf("run %s: session id %q cannot scope a run", c.RunID, c.SessionID)
	}
	item := runItem{JobID: runKeyPrefix + c.Tenant + "#" + c.SessionID + "#" + c.RunID, SK: "completion", RunCompletion: c}
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
