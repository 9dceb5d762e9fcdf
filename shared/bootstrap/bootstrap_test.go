package bootstrap_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/resources"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func TestRunTwiceCreatesNothingSecondTime(t *testing.T) {
	t.Parallel()
	set, err := resources.For(awstest.UniqueEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	clients := bootstrap.ClientsFor(awstest.Config(t))

	first, err := bootstrap.Run(t.Context(), clients, set)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	// 5 tables + 5 TTLs + the events table's stream + 8 queues (4 and their
	// DLQs) + 1 bucket, and on LocalStack the jobs' bus and its rule.
	want := 20
	if clients.EventBridge != nil {
		want += 2
	}
	if got := len(first.Created); got != want {
		t.Errorf("first run created %d resources, want %d: %v", got, want, first.Created)
	}
	if len(first.Existing) != 0 {
		t.Errorf("first run found existing resources: %v", first.Existing)
	}

	second, err := bootstrap.Run(t.Context(), clients, set)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if len(second.Created) != 0 {
		t.Errorf("second run created %v, want nothing", second.Created)
	}
	if len(second.Existing) != len(first.Created) {
		t.Errorf("second run found %d existing, want %d", len(second.Existing), len(first.Created))
	}
	for name, url := range first.QueueURLs {
		if second.QueueURLs[name] != url {
			t.Errorf("queue %s: URL %q then %q", name, url, second.QueueURLs[name])
		}
	}
}

// TestRunTurnsOnTheStreamOfAnOlderEventsTable: an events table made before
// it had a stream (an older environment) gets one.
func TestRunTurnsOnTheStreamOfAnOlderEventsTable(t *testing.T) {
	t.Parallel()
	set, err := resources.For(awstest.UniqueEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	ddb := awsconfig.NewDynamoDB(awstest.Config(t))
	if _, err := ddb.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:   aws.String(set.Events.Name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("session_id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("seq"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("session_id"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("seq"), KeyType: types.KeyTypeRange},
		},
	}); err != nil {
		t.Fatal(err)
	}
	rep, err := bootstrap.Run(t.Context(), bootstrap.ClientsFor(awstest.Config(t)), set)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Created, "stream "+set.Events.Name) {
		t.Errorf("created %v, want the events table's stream", rep.Created)
	}
	desc, err := ddb.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(set.Events.Name)})
	if err != nil || desc.Table.StreamSpecification == nil || !aws.ToBool(desc.Table.StreamSpecification.StreamEnabled) ||
		desc.Table.StreamSpecification.StreamViewType != types.StreamViewTypeNewImage {
		t.Errorf("the events table's stream: %+v %v", desc.Table.StreamSpecification, err)
	}
}
