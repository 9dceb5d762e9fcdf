package devserver

import (
	"context"
	"net/url"
	"path"
	"regexp"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/apigatewaymanagementapi"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/resources"
)

// AWSCall is one AWS action a function's code took, as IAM sees it: the action
// (dynamodb:PutItem, sqs:SendMessage, s3:GetObject, s3:ListBucket…) and the
// resource (a table or queue by its name after "ra-<env>-", an object key, or a
// listed prefix). Presigning counts: a presigned URL acts with the signer's rights.
type AWSCall struct {
	Function string
	Action   string
	Resource string
	// Key is the partition key of the one item a DynamoDB item action acts on
	// (what IAM's dynamodb:LeadingKeys sees); "" for other actions.
	Key string
}

type functionKey struct{}

// withFunction marks ctx as the work of a Lambda function.
func withFunction(ctx context.Context, fn string) context.Context {
	return context.WithValue(ctx, functionKey{}, fn)
}

// auditor returns an SDK option that reports each call of a function's code.
func auditor(set resources.Set, report func(AWSCall)) func(*middleware.Stack) error {
	prefix := "ra-" + set.Env + "-"
	short := func(name string) string { return strings.TrimPrefix(name, prefix) }
	partitionKeys := map[string]string{}
	for _, t := range set.Tables() {
		partitionKeys[t.Name] = t.PartitionKey.Name
		for _, ix := range t.Indexes {
			partitionKeys[t.Name+"/"+ix.Name] = ix.PartitionKey.Name
		}
	}
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("RemoteAgentsAudit",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				fn, _ := ctx.Value(functionKey{}).(string)
				if fn != "" {
					for _, c := range calls(awsmiddleware.GetOperationName(ctx), in.Parameters, short, partitionKeys) {
						c.Function = fn
						report(c)
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// calls is what one SDK operation does in IAM's terms; partitionKeys names
// each table's partition key attribute, by the table's full name.
func calls(op string, params any, short func(string) string, partitionKeys map[string]string) []AWSCall {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	queue := func(u *string) string { return short(path.Base(str(u))) }
	item := func(action string, table *string, key map[string]types.AttributeValue) AWSCall {
		c := AWSCall{Action: action, Resource: short(str(table))}
		if v, ok := key[partitionKeys[str(table)]].(*types.AttributeValueMemberS); ok {
			c.Key = v.Value
		}
		return c
	}
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		return []AWSCall{item(access.GetItem, in.TableName, in.Key)}
	case *dynamodb.PutItemInput:
		return []AWSCall{item(access.PutItem, in.TableName, in.Item)}
	case *dynamodb.UpdateItemInput:
		return []AWSCall{item(access.UpdateItem, in.TableName, in.Key)}
	case *dynamodb.DeleteItemInput:
		return []AWSCall{item("dynamodb:DeleteItem", in.TableName, in.Key)}
	case *dynamodb.QueryInput:
		return []AWSCall{{Action: access.Query, Resource: short(str(in.TableName)), Key: queriedKey(in, partitionKeys)}}
	case *dynamodb.TransactWriteItemsInput:
		var out []AWSCall
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				out = append(out, item(access.PutItem, it.Put.TableName, it.Put.Item))
			case it.Update != nil:
				out = append(out, item(access.UpdateItem, it.Update.TableName, it.Update.Key))
			case it.Delete != nil:
				out = append(out, item("dynamodb:DeleteItem", it.Delete.TableName, it.Delete.Key))
			case it.ConditionCheck != nil:
				out = append(out, item("dynamodb:ConditionCheckItem", it.ConditionCheck.TableName, it.ConditionCheck.Key))
			}
		}
		return out
	case *sqs.SendMessageInput:
		return []AWSCall{{Action: "sqs:SendMessage", Resource: queue(in.QueueUrl)}}
	case *sqs.SendMessageBatchInput:
		return []AWSCall{{Action: "sqs:SendMessage", Resource: queue(in.QueueUrl)}}
	case *eventbridge.PutEventsInput:
		var out []AWSCall
		for _, e := range in.Entries {
			out = append(out, AWSCall{Action: "events:PutEvents", Resource: short(str(e.EventBusName))})
		}
		return out
	case *s3.GetObjectInput:
		return []AWSCall{{Action: access.GetObject, Resource: str(in.Key)}}
	case *s3.HeadObjectInput: // IAM's s3:GetObject allows it
		return []AWSCall{{Action: access.GetObject, Resource: str(in.Key)}}
	case *s3.DeleteObjectsInput:
		var out []AWSCall
		if in.Delete != nil {
			for _, o := range in.Delete.Objects {
				out = append(out, AWSCall{Action: access.DeleteObject, Resource: str(o.Key)})
			}
		}
		return out
	case *s3.PutObjectInput:
		return []AWSCall{{Action: access.PutObject, Resource: str(in.Key)}}
	case *s3.ListObjectsV2Input:
		return []AWSCall{{Action: "s3:ListBucket", Resource: str(in.Prefix)}}
	case *apigatewaymanagementapi.PostToConnectionInput, *apigatewaymanagementapi.DeleteConnectionInput, *apigatewaymanagementapi.GetConnectionInput:
		return []AWSCall{{Action: ManageConnections, Resource: "@connections"}}
	case *s3.CopyObjectInput:
		src := str(in.CopySource)
		if unescaped, err := url.PathUnescape(src); err == nil {
			src = unescaped
		}
		_, key, _ := strings.Cut(src, "/")
		return []AWSCall{{Action: access.GetObject, Resource: key}, {Action: access.PutObject, Resource: str(in.Key)}}
	}
	return []AWSCall{{Action: "unknown:" + op}}
}

// queriedKey is the partition key value a query names (of the table, or of
// the index it queries), "" if it cannot be read from the key condition.
func queriedKey(in *dynamodb.QueryInput, partitionKeys map[string]string) string {
	if in.KeyConditionExpression == nil || in.TableName == nil {
		return ""
	}
	attr := partitionKeys[*in.TableName]
	if in.IndexName != nil {
		attr = partitionKeys[*in.TableName+"/"+*in.IndexName]
	}
	for placeholder, name := range in.ExpressionAttributeNames {
		if name != attr {
			continue
		}
		m := regexp.MustCompile(regexp.QuoteMeta(placeholder) + `\s*=\s*(:[A-Za-z0-9_]+)`).FindStringSubmatch(*in.KeyConditionExpression)
		if m == nil {
			return ""
		}
		if v, ok := in.ExpressionAttributeValues[m[1]].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
	}
	return ""
}

// ManageConnections is the IAM action of the push channel's @connections
// calls (PostToConnection, DeleteConnection, GetConnection).
const ManageConnections = "execute-api:ManageConnections"

// Allowed reports whether the function's declared access allows the call.
func Allowed(c AWSCall) bool {
	a, ok := access.For(c.Function)
	if !ok {
		return false
	}
	switch {
	case strings.HasPrefix(c.Action, "dynamodb:"):
		return a.AllowsItem(c.Resource, c.Action, c.Key)
	case c.Action == "sqs:SendMessage":
		return a.AllowsSend(c.Resource)
	case c.Action == ManageConnections:
		return a.Push
	case c.Action == "events:PutEvents":
		return a.AllowsPutEvents(c.Resource)
	case c.Action == "s3:ListBucket":
		return a.AllowsList(c.Resource)
	case strings.HasPrefix(c.Action, "s3:"):
		return a.AllowsObject(c.Resource, c.Action)
	}
	return false
}
