package devserver

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/resources"
)

// The audit sees the item a call acts on, as IAM's dynamodb:LeadingKeys does,
// and holds the tool functions to configurations and run records.
func TestAuditSeesTheItem(t *testing.T) {
	set, err := resources.For("audit")
	if err != nil {
		t.Fatal(err)
	}
	short := func(name string) string { return name[len("ra-audit-"):] }
	keys := map[string]string{}
	for _, tb := range set.Tables() {
		keys[tb.Name] = tb.PartitionKey.Name
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	update := func(pk string) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{TableName: aws.String(set.Registry.Name), Key: map[string]types.AttributeValue{"pk": s(pk), "sk": s("x")}}
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
