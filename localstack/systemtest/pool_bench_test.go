package systemtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/resources"
)

// BenchmarkCreateReadyPool measures create → ready three ways in one run,
// one of each per iteration (-benchtime=30x in make bench): cold (a type
// with no pool), warm (a type with a pool of 2, refilled by a sweep between
// iterations, off the clock: on two cores the refill's process start would
// compete with the claimed sandbox, which on AWS it does not), and the floor: the DynamoDB and SQS
// round trips the warm create path makes, issued raw with the SDK against
// the same emulators, one after the other. It reports p50, p95 and max of
// each, and warm ÷ floor and cold ÷ floor at p50.
func BenchmarkCreateReadyPool(b *testing.B) {
	s := start(b, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim())
	s.poolType("warm", 2)
	s.poolType("cold", 0)
	s.sweep()
	s.waitIdle("warm", 2)
	floor := newFloor(b, s)
	rec := benchrec.New(b)
	measure := func(typ string) time.Duration {
		body := createBody("Hello")
		body["agent_type"] = typ
		began := time.Now()
		r := s.create(body)
		took := time.Since(began)
		if r.status != http.StatusOK {
			b.Fatalf("create %s: %d %s", typ, r.status, r.raw)
		}
		b.StopTimer()
		if a := s.alive(r.str("agent_id"), r.str("session_token")); (a.body["from_pool"] == true) != (typ == "warm") {
			b.Fatalf("%s create: from_pool %v", typ, a.body["from_pool"])
		}
		s.shutdown(r.str("agent_id"), r.str("session_token"))
		b.StartTimer()
		return took
	}
	for b.Loop() {
		rec.Add("cold", measure("cold"))
		rec.Add("warm", measure("warm"))
		rec.Add("floor", floor.run(b))
		b.StopTimer()
		s.sweep()
		s.waitIdle("warm", 2)
		b.StartTimer()
	}
	b.StopTimer()
	rec.Figure("warm/floor", rec.Percentile("warm", 0.5)/rec.Percentile("floor", 0.5))
	rec.Figure("cold/floor", rec.Percentile("cold", 0.5)/rec.Percentile("floor", 0.5))
	rec.Done()
}

// floor issues the round trips of the warm create path raw.
type floor struct {
	ddb      *dynamodb.Client
	sqs      *sqs.Client
	queue    string
	registry string
	sessions string
}

func newFloor(b *testing.B, s *stack) *floor {
	b.Helper()
	set := s.srv.Env.Resources
	f := &floor{ddb: awsconfig.NewDynamoDB(s.srv.Env.AWS), sqs: awsconfig.NewSQS(s.srv.Env.AWS), registry: set.Registry.Name, sessions: set.Sessions.Name}
	q, err := f.sqs.CreateQueue(b.Context(), &sqs.CreateQueueInput{QueueName: aws.String("ra-" + set.Env + "-floor")})
	if err != nil {
		b.Fatal(err)
	}
	f.queue = *q.QueueUrl
	return f
}

func str(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

// run makes, in order, the calls a warm create makes: create reads the app
// key, project, persona and type and writes the session, then queues its
// start; the worker receives it, reads the session, lists the type's pool,
// claims (a transaction of two updates) and deletes the message; the sandbox
// bootstraps (a read, an update), reads its spec (the session, its persona)
// and reports ready (a read, an update); create reads the session ready.
func (f *floor) run(b *testing.B) time.Duration {
	ctx := b.Context()
	id := fmt.Sprintf("floor-%d", time.Now().UnixNano())
	sessKey := map[string]ddbtypes.AttributeValue{"session_id": str(id)}
	regKey := map[string]ddbtypes.AttributeValue{"pk": str("floor#" + id), "sk": str("floor")}
	get := func(table string, key map[string]ddbtypes.AttributeValue) {
		if _, err := f.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)}); err != nil {
			b.Fatal(err)
		}
	}
	update := func(table string, key map[string]ddbtypes.AttributeValue) {
		if _, err := f.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key,
			UpdateExpression: aws.String("SET #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": str("x")}}); err != nil {
			b.Fatal(err)
		}
	}
	began := time.Now()
	for range 4 {
		get(f.registry, regKey)
	}
	if _, err := f.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &f.sessions, Item: map[string]ddbtypes.AttributeValue{"session_id": str(id), "state": str("provisioning")},
		ConditionExpression: aws.String("attribute_not_exists(session_id)")}); err != nil {
		b.Fatal(err)
	}
	if _, err := f.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &f.queue, MessageBody: aws.String(id)}); err != nil {
		b.Fatal(err)
	}
	var handle *string
	for handle == nil {
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &f.queue, MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Messages) > 0 {
			handle = out.Messages[0].ReceiptHandle
		}
	}
	get(f.sessions, sessKey)
	if _, err := f.ddb.Query(ctx, &dynamodb.QueryInput{TableName: &f.registry, IndexName: aws.String(resources.RegistryByKind),
		KeyConditionExpression: aws.String("kind = :k AND begins_with(#n, :n)"), ExpressionAttributeNames: map[string]string{"#n": "name"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":k": str("pool"), ":n": str("floor#")}}); err != nil {
		b.Fatal(err)
	}
	set := func(table string, key map[string]ddbtypes.AttributeValue) ddbtypes.TransactWriteItem {
		return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: &table, Key: key, UpdateExpression: aws.String("SET #s = :s"),
			ExpressionAttributeNames: map[string]string{"#s": "state"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": str("claimed")}}}
	}
	if _, err := f.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{set(f.registry, regKey), set(f.sessions, sessKey)}}); err != nil {
		b.Fatal(err)
	}
	if _, err := f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &f.queue, ReceiptHandle: handle}); err != nil {
		b.Fatal(err)
	}
	get(f.sessions, sessKey)
	update(f.sessions, sessKey)
	get(f.sessions, sessKey)
	get(f.registry, regKey)
	get(f.sessions, sessKey)
	update(f.sessions, sessKey)
	get(f.sessions, sessKey)
	return time.Since(began)
}
