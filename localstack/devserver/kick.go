package devserver

import (
	"context"
	"path"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// kicker signals kick after each message sent to the queue called name (a
// send's QueueUrl ends with it): the dev server's kicked pollers then
// receive it at once.
func kicker(name string, kick chan<- struct{}) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("RemoteAgentsKick",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err == nil && sentTo(awsmiddleware.GetOperationName(ctx), in.Parameters) == name {
					select {
					case kick <- struct{}{}:
					default: // a kick is pending already: one receive takes every message
					}
				}
				return out, md, err
			}), middleware.After)
	}
}

// sentTo is the queue name an SQS send goes to, "" for any other call.
func sentTo(op string, params any) string {
	var u *string
	switch op {
	case "SendMessage":
		if in, ok := params.(*sqs.SendMessageInput); ok {
			u = in.QueueUrl
		}
	case "SendMessageBatch":
		if in, ok := params.(*sqs.SendMessageBatchInput); ok {
			u = in.QueueUrl
		}
	}
	if u == nil {
		return ""
	}
	return path.Base(*u)
}

// writeKicker signals kick after each write that may add an item to the
// table called table (a put, a transaction naming it): the dev server's
// stream reader then reads at once, as a Lambda stream mapping is told of
// new records within moments.
func writeKicker(table string, kick chan<- struct{}) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("RemoteAgentsWriteKick",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err == nil && writes(in.Parameters, table) {
					select {
					case kick <- struct{}{}:
					default:
					}
				}
				return out, md, err
			}), middleware.After)
	}
}

// writes reports whether a DynamoDB call's input puts to table.
func writes(params any, table string) bool {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		return aws.ToString(in.TableName) == table
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if it.Put != nil && aws.ToString(it.Put.TableName) == table {
				return true
			}
		}
	case *dynamodb.BatchWriteItemInput:
		_, ok := in.RequestItems[table]
		return ok
	}
	return false
}
