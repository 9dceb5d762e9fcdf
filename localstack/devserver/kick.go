package devserver

import (
	"context"
	"path"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
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
