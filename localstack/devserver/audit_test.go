package devserver

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/shared/resources"
)

// The audit sees the item a call acts on, as IAM's dynamodb:LeadingKeys does,
// and holds the tool functions to configurations and run records.
func TestAuditSeesTheItem(t *testing.T) {
	set, err := resources.For("audit")
	if err != nil {
		t.Fatal(err)
	}
	short := func(name string) string { return strings.TrimPrefix(name, "ra-audit-") }
	keys := map[string]string{}
	for _, tb := range set.Tables() {
		keys[tb.Name] = tb.PartitionKey.Name
		for _, ix := range tb.Indexes {
			keys[tb.Name+"/"+ix.Name] = ix.PartitionKey.Name
		}
	}
	putEvents := func(bus string) *eventbridge.PutEventsInput {
		return &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{EventBusName: aws.String(bus)}}}
	}
	orchestrator := &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://sqs/000000000000/" + set.OrchestratorQueue.Name)}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	update := func(pk string) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{TableName: aws.String(set.Registry.Name), Key: map[string]types.AttributeValue{"pk": s(pk), "sk": s("x")}}
	}
	byKind := func(kind string) *dynamodb.QueryInput {
		return &dynamodb.QueryInput{TableName: aws.String(set.Registry.Name), IndexName: aws.String("by_kind"),
			KeyConditionExpression:    aws.String("(#0 = :0) AND (begins_with (#1, :1))"),
			ExpressionAttributeNames:  map[string]string{"#0": "kind", "#1": "name"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":0": s(kind), ":1": s("dev#")}}
	}
	cases := []struct {
		name   string
		fn     string
		params any
		want   []AWSCall
		allow  bool
	}{
		{"a configuration", "toolcallback", update("configuration#dev#demo-web"),
			[]AWSCall{{Action: "dynamodb:UpdateItem", Resource: "registry", Key: "configuration#dev#demo-web"}}, true},
		{"an app key", "toolcallback", update("app_key#0123"),
			[]AWSCall{{Action: "dynamodb:UpdateItem", Resource: "registry", Key: "app_key#0123"}}, false},
		{"an app key, from jobworker", "jobworker", update("app_key#0123"),
			[]AWSCall{{Action: "dynamodb:UpdateItem", Resource: "registry", Key: "app_key#0123"}}, false},
		{"a run record in a transaction", "toolcallback", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(set.Jobs.Name), Item: map[string]types.AttributeValue{"job_id": s("run#dev#r"), "sk": s("completion")}}},
		}}, []AWSCall{{Action: "dynamodb:PutItem", Resource: "jobs", Key: "run#dev#r"}}, true},
		{"a job", "toolcallback", &dynamodb.PutItemInput{TableName: aws.String(set.Jobs.Name), Item: map[string]types.AttributeValue{"job_id": s("job-1"), "sk": s("job")}},
			[]AWSCall{{Action: "dynamodb:PutItem", Resource: "jobs", Key: "job-1"}}, false},
		{"an agent type", "agenttypes", update("agent_type#dev#coder"),
			[]AWSCall{{Action: "dynamodb:UpdateItem", Resource: "registry", Key: "agent_type#dev#coder"}}, true},
		{"a persona, from agenttypes", "agenttypes", update("persona#dev#assistant"),
			[]AWSCall{{Action: "dynamodb:UpdateItem", Resource: "registry", Key: "persona#dev#assistant"}}, false},
		{"the agent types of the by_kind index", "agenttypes", byKind("agent_type"),
			[]AWSCall{{Action: "dynamodb:Query", Resource: "registry", Key: "agent_type"}}, true},
		{"the app keys of the by_kind index", "agenttypes", byKind("app_key"),
			[]AWSCall{{Action: "dynamodb:Query", Resource: "registry", Key: "app_key"}}, false},
		{"job events, from jobworker", "jobworker", putEvents("ra-audit-jobs"),
			[]AWSCall{{Action: "events:PutEvents", Resource: "jobs"}}, true},
		{"job events on another bus", "jobworker", putEvents("default"),
			[]AWSCall{{Action: "events:PutEvents", Resource: "default"}}, false},
		{"job events, from toolcallback", "toolcallback", putEvents("ra-audit-jobs"),
			[]AWSCall{{Action: "events:PutEvents", Resource: "jobs"}}, false},
		{"job events on the orchestrator queue, from jobworker", "jobworker", orchestrator,
			[]AWSCall{{Action: "sqs:SendMessage", Resource: "orchestrator"}}, true},
		{"the orchestrator queue, from create", "create", orchestrator,
			[]AWSCall{{Action: "sqs:SendMessage", Resource: "orchestrator"}}, false},
		{"a session, not limited by item", "toolcallback", &dynamodb.GetItemInput{TableName: aws.String(set.Sessions.Name), Key: map[string]types.AttributeValue{"session_id": s("abc")}},
			[]AWSCall{{Action: "dynamodb:GetItem", Resource: "sessions", Key: "abc"}}, true},
	}
	for _, c := range cases {
		got := calls("op", c.params, short, keys)
		if len(got) != len(c.want) {
			t.Fatalf("%s: calls %+v, want %+v", c.name, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: call %+v, want %+v", c.name, got[i], c.want[i])
			}
			got[i].Function = c.fn
			if Allowed(got[i]) != c.allow {
				t.Errorf("%s: %s allowed %v, want %v", c.name, c.fn, !c.allow, c.allow)
			}
		}
	}
}
