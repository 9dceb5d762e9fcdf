// Package dynamo is the DynamoDB adapter: typed items in and out of one table, with
// conditional writes, strongly consistent reads, transactions and bounded paging.
//
// Items are Go structs (or maps) whose `json` tags name their attributes, so domain
// types need no DynamoDB-specific tags. Conditions and updates are built with the
// SDK's expression package. The stores of the domain packages are built on Table.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/awserr"
)

// API is the part of the DynamoDB client the adapter calls; *dynamodb.Client has it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Errors returned (wrapped) by Table and Transact; test with errors.Is.
var (
	// ErrNotFound: Get found no item with that key.
	ErrNotFound = errors.New("item not found")
	// ErrConditionFailed: a write's condition did not hold; nothing was written.
	ErrConditionFailed = errors.New("condition failed")
)

// ConditionFailedError carries the item as it was when a single-item write's
// condition failed (empty if there was no item). It matches ErrConditionFailed.
type ConditionFailedError struct {
	Table string
	Item  map[string]types.AttributeValue
}

func (e *ConditionFailedError) Error() string {
	return fmt.Sprintf("write to %s: %v", e.Table, ErrConditionFailed)
}

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionFailedError) Is(target error) bool { return target == ErrConditionFailed }

// Decode unmarshals the item found at the time of the failed condition into out.
// It returns ErrNotFound when there was no item.
func (e *ConditionFailedError) Decode(out any) error {
	if len(e.Item) == 0 {
		return ErrNotFound
	}
	return unmarshal(e.Item, out)
}

// Table is one DynamoDB table.
type Table struct {
	api  API
	name string
}

// NewTable returns the table called name, reached through api.
func NewTable(api API, name string) *Table {
	return &Table{api: api, name: name}
}

// Name returns the table's full name.
func (t *Table) Name() string { return t.name }

// Get reads the item with key into out, strongly consistent. It returns ErrNotFound
// when there is none.
func (t *Table) Get(ctx context.Context, key, out any) error {
	k, err := marshalMap(key)
	if err != nil {
		return fmt.Errorf("get from %s: %w", t.name, err)
	}
	res, err := t.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &t.name,
		Key:            k,
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("get from %s: %w", t.name, awserr.Classify(err))
	}
	if len(res.Item) == 0 {
		return fmt.Errorf("get from %s: %w", t.name, ErrNotFound)
	}
	if err := unmarshal(res.Item, out); err != nil {
		return fmt.Errorf("get from %s: %w", t.name, err)
	}
	return nil
}

// Put writes item, replacing any item with the same key, if every condition holds.
// A failed condition returns a *ConditionFailedError holding the existing item.
func (t *Table) Put(ctx context.Context, item any, conds ...expression.ConditionBuilder) error {
	av, err := marshalMap(item)
	if err != nil {
		return fmt.Errorf("put to %s: %w", t.name, err)
	}
	in := &dynamodb.PutItemInput{TableName: &t.name, Item: av}
	if len(conds) > 0 {
		expr, err := build(conds, nil)
		if err != nil {
			return fmt.Errorf("put to %s: %w", t.name, err)
		}
		in.ConditionExpression = expr.Condition()
		in.ExpressionAttributeNames = expr.Names()
		in.ExpressionAttributeValues = expr.Values()
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	if _, err := t.api.PutItem(ctx, in); err != nil {
		return t.writeErr("put to", err)
	}
	return nil
}

// Update applies update to the item with key (creating it if absent, as DynamoDB
// does) if every condition holds, and decodes the item as updated into out unless
// out is nil. A failed condition returns a *ConditionFailedError.
func (t *Table) Update(ctx context.Context, key any, update expression.UpdateBuilder, out any, conds ...expression.ConditionBuilder) error {
	k, err := marshalMap(key)
	if err != nil {
		return fmt.Errorf("update %s: %w", t.name, err)
	}
	expr, err := build(conds, &update)
	if err != nil {
		return fmt.Errorf("update %s: %w", t.name, err)
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           &t.name,
		Key:                                 k,
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if out != nil {
		in.ReturnValues = types.ReturnValueAllNew
	}
	res, err := t.api.UpdateItem(ctx, in)
	if err != nil {
		return t.writeErr("update", err)
	}
	if out != nil {
		if err := unmarshal(res.Attributes, out); err != nil {
			return fmt.Errorf("update %s: %w", t.name, err)
		}
	}
	return nil
}

// Delete removes the item with key if every condition holds. Deleting an absent
// item without conditions succeeds.
func (t *Table) Delete(ctx context.Context, key any, conds ...expression.ConditionBuilder) error {
	k, err := marshalMap(key)
	if err != nil {
		return fmt.Errorf("delete from %s: %w", t.name, err)
	}
	in := &dynamodb.DeleteItemInput{TableName: &t.name, Key: k}
	if len(conds) > 0 {
		expr, err := build(conds, nil)
		if err != nil {
			return fmt.Errorf("delete from %s: %w", t.name, err)
		}
		in.ConditionExpression = expr.Condition()
		in.ExpressionAttributeNames = expr.Names()
		in.ExpressionAttributeValues = expr.Values()
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	if _, err := t.api.DeleteItem(ctx, in); err != nil {
		return t.writeErr("delete from", err)
	}
	return nil
}

func (t *Table) writeErr(op string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s %s: %w", op, t.name, &ConditionFailedError{Table: t.name, Item: ccf.Item})
	}
	return fmt.Errorf("%s %s: %w", op, t.name, awserr.Classify(err))
}

// build combines conditions (ANDed) and an optional update into one expression.
func build(conds []expression.ConditionBuilder, update *expression.UpdateBuilder) (expression.Expression, error) {
	b := expression.NewBuilder()
	if update != nil {
		b = b.WithUpdate(*update)
	}
	if len(conds) > 0 {
		cond := conds[0]
		for _, c := range conds[1:] {
			cond = cond.And(c)
		}
		b = b.WithCondition(cond)
	}
	expr, err := b.Build()
	if err != nil {
		return expression.Expression{}, fmt.Errorf("build expression: %w", err)
	}
	return expr, nil
}

func marshalMap(v any) (map[string]types.AttributeValue, error) {
	if m, ok := v.(map[string]types.AttributeValue); ok {
		return m, nil
	}
	m, err := attributevalue.MarshalMapWithOptions(v, func(o *attributevalue.EncoderOptions) {
		o.TagKey = "json"
		o.OmitEmptyTime = true
		o.EncodeTime = encodeTime
	})
	if err != nil {
		return nil, fmt.Errorf("marshal item: %w", err)
	}
	return m, nil
}

// encodeTime stores a time as an RFC 3339 string in UTC: one format, which
// sorts as it reads.
func encodeTime(t time.Time) (types.AttributeValue, error) {
	return &types.AttributeValueMemberS{Value: t.UTC().Format(time.RFC3339Nano)}, nil
}

func unmarshal(item map[string]types.AttributeValue, out any) error {
	if err := attributevalue.UnmarshalMapWithOptions(item, out, func(o *attributevalue.DecoderOptions) {
		o.TagKey = "json"
	}); err != nil {
		return fmt.Errorf("unmarshal item: %w", err)
	}
	return nil
}

// Value is expression.Value for a Go value encoded with its `json` tags, as items
// are; use it for struct and slice values in updates and conditions.
func Value(v any) expression.ValueBuilder {
	return expression.ValueWithOptions(v, func(o *expression.ValueBuilderOptions) {
		o.EncoderOptions = append(o.EncoderOptions, func(e *attributevalue.EncoderOptions) {
			e.TagKey = "json"
			e.OmitEmptyTime = true
			e.EncodeTime = encodeTime
		})
	})
}
