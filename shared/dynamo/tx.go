package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awserr"
)

// MaxTxOps is DynamoDB's limit on the operations of one transaction.
const MaxTxOps = 100

// TxOp is one operation of a transaction, made by a Table's Put, Update, Delete
// or Check op constructors and run by Transact.
type TxOp struct {
	item types.TransactWriteItem
	err  error
}

// PutOp is a transactional Put of item under the conditions.
func (t *Table) PutOp(item any, conds ...expression.ConditionBuilder) TxOp {
	av, err := marshalMap(item)
	if err != nil {
		return TxOp{err: fmt.Errorf("put to %s: %w", t.name, err)}
	}
	p := &types.Put{TableName: &t.name, Item: av}
	if len(conds) > 0 {
		expr, err := build(conds, nil)
		if err != nil {
			return TxOp{err: fmt.Errorf("put to %s: %w", t.name, err)}
		}
		p.ConditionExpression = expr.Condition()
		p.ExpressionAttributeNames = expr.Names()
		p.ExpressionAttributeValues = expr.Values()
	}
	return TxOp{item: types.TransactWriteItem{Put: p}}
}

// UpdateOp is a transactional Update of the item with key under the conditions.
func (t *Table) UpdateOp(key any, update expression.UpdateBuilder, conds ...expression.ConditionBuilder) TxOp {
	k, err := marshalMap(key)
	if err != nil {
		return TxOp{err: fmt.Errorf("update %s: %w", t.name, err)}
	}
	expr, err := build(conds, &update)
	if err != nil {
		return TxOp{err: fmt.Errorf("update %s: %w", t.name, err)}
	}
	return TxOp{item: types.TransactWriteItem{Update: &types.Update{
		TableName:                 &t.name,
		Key:                       k,
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}}
}

// DeleteOp is a transactional Delete of the item with key under the conditions.
func (t *Table) DeleteOp(key any, conds ...expression.ConditionBuilder) TxOp {
	k, err := marshalMap(key)
	if err != nil {
		return TxOp{err: fmt.Errorf("delete from %s: %w", t.name, err)}
	}
	d := &types.Delete{TableName: &t.name, Key: k}
	if len(conds) > 0 {
		expr, err := build(conds, nil)
		if err != nil {
			return TxOp{err: fmt.Errorf("delete from %s: %w", t.name, err)}
		}
		d.ConditionExpression = expr.Condition()
		d.ExpressionAttributeNames = expr.Names()
		d.ExpressionAttributeValues = expr.Values()
	}
	return TxOp{item: types.TransactWriteItem{Delete: d}}
}

// CheckOp makes the transaction depend on cond holding for the item with key,
// without writing it.
func (t *Table) CheckOp(key any, cond expression.ConditionBuilder) TxOp {
	k, err := marshalMap(key)
	if err != nil {
		return TxOp{err: fmt.Errorf("check %s: %w", t.name, err)}
	}
	expr, err := build([]expression.ConditionBuilder{cond}, nil)
	if err != nil {
		return TxOp{err: fmt.Errorf("check %s: %w", t.name, err)}
	}
	return TxOp{item: types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                 &t.name,
		Key:                       k,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}}}
}

// TxCanceledError reports a canceled transaction: nothing of it was written.
// Reasons holds one code per operation, in order ("None" for those that were fine).
// It matches ErrConditionFailed when any operation's condition failed.
type TxCanceledError struct {
	Reasons []string
}

func (e *TxCanceledError) Error() string {
	return "transaction canceled: " + strings.Join(e.Reasons, ", ")
}

// Is makes errors.Is(err, ErrConditionFailed) true when a condition failed.
func (e *TxCanceledError) Is(target error) bool {
	if target != ErrConditionFailed {
		return false
	}
	for _, r := range e.Reasons {
		if r == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

// transient reports whether the transaction was canceled only because DynamoDB
// could not serve it now (throttled, or in conflict with another transaction):
// the same transaction may succeed when retried.
func (e *TxCanceledError) transient() bool {
	found := false
	for _, r := range e.Reasons {
		switch r {
		case "None":
		case "ThrottlingError", "TransactionConflict", "ProvisionedThroughputExceeded":
			found = true
		default:
			return false
		}
	}
	return found
}

// Transact runs ops as one all-or-nothing transaction. clientToken, if not empty,
// makes retries of the same transaction idempotent for ten minutes (DynamoDB's
// ClientRequestToken). A canceled transaction returns a *TxCanceledError.
func Transact(ctx context.Context, api API, clientToken string, ops ...TxOp) error {
	if len(ops) == 0 || len(ops) > MaxTxOps {
		return fmt.Errorf("transaction of %d operations: want 1..%d", len(ops), MaxTxOps)
	}
	items := make([]types.TransactWriteItem, len(ops))
	for i, op := range ops {
		if op.err != nil {
			return fmt.Errorf("transaction operation %d: %w", i, op.err)
		}
		items[i] = op.item
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
	if clientToken != "" {
		in.ClientRequestToken = &clientToken
	}
	if _, err := api.TransactWriteItems(ctx, in); err != nil {
		var canceled *types.TransactionCanceledException
		if errors.As(err, &canceled) {
			reasons := make([]string, len(canceled.CancellationReasons))
			for i, r := range canceled.CancellationReasons {
				reasons[i] = "None"
				if r.Code != nil {
					reasons[i] = *r.Code
				}
			}
			tx := &TxCanceledError{Reasons: reasons}
			if tx.transient() {
				return fmt.Errorf("transact write: %w", apierror.Unavailable(tx))
			}
			return fmt.Errorf("transact write: %w", tx)
		}
		return fmt.Errorf("transact write: %w", awserr.Classify(err))
	}
	return nil
}
