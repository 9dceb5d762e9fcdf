package dynamo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/awserr"
)

// Page sizes. A query never returns more than MaxPageSize items: callers page on
// with the cursor, so no request loads an unbounded result.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// ErrBadCursor: a cursor was not one Query returned.
var ErrBadCursor = errors.New("invalid page cursor")

// Cursor is an opaque position in a query's results; "" is the start, and Query
// returns "" when there is nothing more.
type Cursor string

// Query selects items by key condition, from the table or one of its indexes.
type Query struct {
	// Index names a global secondary index; "" queries the table.
	Index string
	// Key is the key condition: partition key equality, optionally a sort key range.
	Key expression.KeyConditionBuilder
	// Filter, if set, drops items after they are read (they still count to Limit).
	Filter *expression.ConditionBuilder
	// Limit is the page size: 0 means DefaultPageSize; above MaxPageSize is an error.
	Limit int
	// After continues from a cursor a previous page returned.
	After Cursor
	// Scope, if set, are string attributes (the partition key's) a cursor
	// must hold with these values: a cursor made for another partition is
	// ErrBadCursor, not a read of it.
	Scope map[string]string
	// Descending reverses the sort key order.
	Descending bool
	// Consistent asks for a strongly consistent read (tables only, not indexes).
	Consistent bool
}

// Query reads one page of items matching q into out (a pointer to a slice) and
// returns the cursor of the next page, or "" when there is none.
func (t *Table) Query(ctx context.Context, q Query, out any) (Cursor, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultPageSize
	case limit < 0 || limit > MaxPageSize:
		return "", fmt.Errorf("query %s: page size %d outside 1..%d", t.name, limit, MaxPageSize)
	}
	b := expression.NewBuilder().WithKeyCondition(q.Key)
	if q.Filter != nil {
		b = b.WithFilter(*q.Filter)
	}
	expr, err := b.Build()
	if err != nil {
		return "", fmt.Errorf("query %s: build expression: %w", t.name, err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 &t.name,
		KeyConditionExpression:    expr.KeyCondition(),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		Limit:                     aws.Int32(int32(limit)),
		ScanIndexForward:          aws.Bool(!q.Descending),
	}
	if q.Index != "" {
		in.IndexName = &q.Index
	} else if q.Consistent {
		in.ConsistentRead = aws.Bool(true)
	}
	if q.After != "" {
		start, err := decodeCursor(q.After)
		if err != nil {
			return "", fmt.Errorf("query %s: %w", t.name, err)
		}
		for name, want := range q.Scope {
			if v, ok := start[name].(*types.AttributeValueMemberS); !ok || v.Value != want {
				return "", fmt.Errorf("query %s: %w", t.name, ErrBadCursor)
			}
		}
		in.ExclusiveStartKey = start
	}
	res, err := t.api.Query(ctx, in)
	var invalid interface{ ErrorCode() string }
	if err != nil && in.ExclusiveStartKey != nil && errors.As(err, &invalid) && invalid.ErrorCode() == "ValidationException" {
		// A cursor of the right form whose key is not one of this query's
		// (names or values changed): DynamoDB refuses the starting key.
		return "", fmt.Errorf("query %s: %w", t.name, ErrBadCursor)
	}
	if err != nil {
		return "", fmt.Errorf("query %s: %w", t.name, awserr.Classify(err))
	}
	if err := attributevalue.UnmarshalListOfMapsWithOptions(res.Items, out, func(o *attributevalue.DecoderOptions) {
		o.TagKey = "json"
	}); err != nil {
		return "", fmt.Errorf("query %s: unmarshal items: %w", t.name, err)
	}
	next, err := encodeCursor(res.LastEvaluatedKey)
	if err != nil {
		return "", fmt.Errorf("query %s: %w", t.name, err)
	}
	return next, nil
}

// cursorValue is one key attribute of a cursor; keys are only strings, numbers or binary.
type cursorValue struct {
	S *string `json:"S,omitempty"`
	N *string `json:"N,omitempty"`
	B []byte  `json:"B,omitempty"`
}

func encodeCursor(key map[string]types.AttributeValue) (Cursor, error) {
	if len(key) == 0 {
		return "", nil
	}
	m := make(map[string]cursorValue, len(key))
	for name, v := range key {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			m[name] = cursorValue{S: &v.Value}
		case *types.AttributeValueMemberN:
			m[name] = cursorValue{N: &v.Value}
		case *types.AttributeValueMemberB:
			m[name] = cursorValue{B: v.Value}
		default:
			return "", fmt.Errorf("encode cursor: key attribute %q has type %T", name, v)
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return Cursor(base64.RawURLEncoding.EncodeToString(raw)), nil
}

func decodeCursor(c Cursor) (map[string]types.AttributeValue, error) {
	raw, err := base64.RawURLEncoding.DecodeString(string(c))
	if err != nil {
		return nil, ErrBadCursor
	}
	var m map[string]cursorValue
	if err := json.Unmarshal(raw, &m); err != nil || len(m) == 0 || len(m) > 4 {
		return nil, ErrBadCursor
	}
	key := make(map[string]types.AttributeValue, len(m))
	for name, v := range m {
		switch {
		case v.S != nil && v.N == nil && v.B == nil:
			key[name] = &types.AttributeValueMemberS{Value: *v.S}
		case v.N != nil && v.S == nil && v.B == nil:
			key[name] = &types.AttributeValueMemberN{Value: *v.N}
		case v.B != nil && v.S == nil && v.N == nil:
			key[name] = &types.AttributeValueMemberB{Value: v.B}
		default:
			return nil, ErrBadCursor
		}
	}
	return key, nil
}

// QueryAll reads q page by page, up to max items (none for max ≤ 0), and
// returns them.
func QueryAll[T any](ctx context.Context, t *Table, q Query, max int) ([]T, error) {
	var out []T
	for len(out) < max {
		var page []T
		q.Limit = min(MaxPageSize, max-len(out))
		next, err := t.Query(ctx, q, &page)
		if err != nil {
			return out, err
		}
		out = append(out, page...)
		if next == "" {
			break
		}
		q.After = next
	}
	return out, nil
}
