package systemtest_test

import (
	"fmt"
	"net/http"
	"sync"
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

// BenchmarkCreateReadyPool measures create → ready four ways in one run,
// one of each per iteration (-benchtime=30x in make bench): cold (a type
// with no pool), warm (a type with a pool of 2, refilled by a sweep between
// iterations, off the clock: on two cores the refill's process start would
// compete with the claimed sandbox, which on AWS it does not), and two
// floors issued raw with the SDK against the same emulators: floor, the
// DynamoDB and SQS round trips the warm path makes one after the other (its
// own calls, at once where it makes them at once), and floor-min, the 17 a
// warm create could not do without (no quota, no exactly-once events, no
// token check per sandbox request). It reports p50, p95 and max of each,
// and warm and cold ÷ floor, warm ÷ floor-min at p50.
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
		// The floors and then warm while nothing else runs (right after a
		// create, its agent's first turn would slow what comes next), then
		// cold.
		rec.Add("floor-min", floor.min(b))
		rec.Add("floor", floor.run(b))
		rec.Add("warm", measure("warm"))
		rec.Add("cold", measure("cold"))
		b.StopTimer()
		s.sweep()
		s.waitIdle("warm", 2)
		b.StartTimer()
	}
	b.StopTimer()
	rec.Figure("warm/floor", rec.Percentile("warm", 0.5)/rec.Percentile("floor", 0.5))
	rec.Figure("cold/floor", rec.Percentile("cold", 0.5)/rec.Percentile("floor", 0.5))
	rec.Figure("warm/floor-min", rec.Percentile("warm", 0.5)/rec.Percentile("floor-min", 0.5))
	rec.Done()
}

// floor issues the round trips of the warm create path raw.
type floor struct {
	ddb      *dynamodb.Client
	sqs      *sqs.Client
	queue    string
	registry string
	sessions string
	events   string
	once     string
}

func newFloor(b *testing.B, s *stack) *floor {
	b.Helper()
	set := s.srv.Env.Resources
	f := &floor{ddb: awsconfig.NewDynamoDB(s.srv.Env.AWS), sqs: awsconfig.NewSQS(s.srv.Env.AWS), registry: set.Registry.Name, sessions: set.Sessions.Name,
		events: set.Events.Name, once: set.Idempotency.Name}
	q, err := f.sqs.CreateQueue(b.Context(), &sqs.CreateQueueInput{QueueName: aws.String("ra-" + set.Env + "-floor")})
	if err != nil {
		b.Fatal(err)
	}
	f.queue = *q.QueueUrl
	return f
}

func str(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

// calls are one floor run's round trips against fixed keys.
type calls struct {
	b      *testing.B
	f      *floor
	id     string
	sess   map[string]ddbtypes.AttributeValue
	reg    map[string]ddbtypes.AttributeValue
	handle *string
}

func (f *floor) calls(b *testing.B) *calls {
	id := fmt.Sprintf("floor-%d", time.Now().UnixNano())
	return &calls{b: b, f: f, id: id, sess: map[string]ddbtypes.AttributeValue{"session_id": str(id)},
		reg: map[string]ddbtypes.AttributeValue{"pk": str("floor#" + id), "sk": str("floor")}}
}

func (c *calls) check(err error) {
	if err != nil {
		c.b.Fatal(err)
	}
}

func (c *calls) get(table string, key map[string]ddbtypes.AttributeValue) {
	_, err := c.f.ddb.GetItem(c.b.Context(), &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	c.check(err)
}

func (c *calls) update(table string, key map[string]ddbtypes.AttributeValue) {
	_, err := c.f.ddb.UpdateItem(c.b.Context(), &dynamodb.UpdateItemInput{TableName: &table, Key: key,
		UpdateExpression: aws.String("SET #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": str("x")}})
	c.check(err)
}

func (c *calls) query(table, index, key, value string) {
	_, err := c.f.ddb.Query(c.b.Context(), &dynamodb.QueryInput{TableName: &table, IndexName: &index,
		KeyConditionExpression: aws.String("#k = :k"), ExpressionAttributeNames: map[string]string{"#k": key},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":k": str(value)}})
	c.check(err)
}

func (c *calls) transact(items ...ddbtypes.TransactWriteItem) {
	_, err := c.f.ddb.TransactWriteItems(c.b.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: items})
	c.check(err)
}

func (c *calls) set(table string, key map[string]ddbtypes.AttributeValue) ddbtypes.TransactWriteItem {
	return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{TableName: &table, Key: key, UpdateExpression: aws.String("SET #s = :s"),
		ExpressionAttributeNames: map[string]string{"#s": "state"}, ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": str("claimed")}}}
}

func (c *calls) put(table string, item map[string]ddbtypes.AttributeValue) ddbtypes.TransactWriteItem {
	return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: &table, Item: item}}
}

// parallel runs the calls at once and waits for them.
func parallel(calls ...func()) {
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Go(call)
	}
	wg.Wait()
}

// newSession is the write of the session if it is new, in a transaction.
func (c *calls) newSession() ddbtypes.TransactWriteItem {
	return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: &c.f.sessions, Item: map[string]ddbtypes.AttributeValue{"session_id": str(c.id), "state": str("provisioning")},
		ConditionExpression: aws.String("attribute_not_exists(session_id)")}}
}

// create writes the session if it is new.
func (c *calls) create() {
	_, err := c.f.ddb.PutItem(c.b.Context(), &dynamodb.PutItemInput{TableName: &c.f.sessions, Item: map[string]ddbtypes.AttributeValue{"session_id": str(c.id), "state": str("provisioning")},
		ConditionExpression: aws.String("attribute_not_exists(session_id)")})
	c.check(err)
}

// queue sends the start and receives it, as the worker does.
func (c *calls) queue() {
	ctx := c.b.Context()
	_, err := c.f.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &c.f.queue, MessageBody: aws.String(c.id)})
	c.check(err)
	for c.handle == nil {
		out, err := c.f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &c.f.queue, MaxNumberOfMessages: 1, WaitTimeSeconds: 1})
		c.check(err)
		if len(out.Messages) > 0 {
			c.handle = out.Messages[0].ReceiptHandle
		}
	}
}

func (c *calls) deleteMessage() {
	_, err := c.f.sqs.DeleteMessage(c.b.Context(), &sqs.DeleteMessageInput{QueueUrl: &c.f.queue, ReceiptHandle: c.handle})
	c.check(err)
}

// run makes, in order, the calls on a warm create's path (the warm create
// makes others beside them, which it does not wait for).
//   - create: reads the app key; reads the project, the persona and the
//     type at once (one of them twice: the tenant's, then the platform's);
//     writes the session with the tenant's live and minute counters (one
//     transaction); queues its start;
//   - the worker receives it, reads the session, lists the type's pool and
//     claims (a transaction of two updates), then tells the sandbox;
//   - the sandbox redeems its bootstrap code (a read, an update); reads its
//     spec (the token's read, then the served guardrails written while the
//     persona is read); appends its workspace's events once (the token's
//     read, the append id's read, the sequence's update, a transaction of
//     the events and the id's record); reports ready (a read, an update);
//   - create reads the session ready.
func (f *floor) run(b *testing.B) time.Duration {
	c := f.calls(b)
	began := time.Now()
	c.get(f.registry, c.reg)
	parallel(func() { c.get(f.registry, c.reg) }, func() { c.get(f.registry, c.reg); c.get(f.registry, c.reg) }, func() { c.get(f.registry, c.reg) })
	counter := func(name string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"key": str(name + "#" + c.id)}
	}
	c.transact(c.newSession(), c.set(f.once, counter("floor-live")), c.set(f.once, counter("floor-minute")))
	c.queue()
	c.get(f.sessions, c.sess)
	c.query(f.registry, resources.RegistryByKind, "kind", "floor-pool")
	c.transact(c.set(f.registry, c.reg), c.set(f.sessions, c.sess))
	c.get(f.sessions, c.sess)
	c.update(f.sessions, c.sess)
	c.get(f.sessions, c.sess)
	parallel(func() { c.update(f.sessions, c.sess) }, func() { c.get(f.registry, c.reg) })
	c.get(f.sessions, c.sess)
	c.get(f.once, map[string]ddbtypes.AttributeValue{"key": str(c.id)})
	c.update(f.sessions, c.sess)
	seq := func(n string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"session_id": str(c.id), "seq": &ddbtypes.AttributeValueMemberN{Value: n}}
	}
	c.transact(c.put(f.events, seq("1")), c.put(f.events, seq("2")), c.put(f.once, map[string]ddbtypes.AttributeValue{"key": str(c.id)}))
	c.get(f.sessions, c.sess)
	c.update(f.sessions, c.sess)
	c.get(f.sessions, c.sess)
	took := time.Since(began)
	c.deleteMessage() // the worker's, once the sandbox was told: off the path
	return took
}

// min makes, in order, the 17 calls a warm create could not do without:
// create reads the app key, project, persona and type and writes the
// session, then queues its start; the worker receives it, reads the
// session, lists the type's pool, claims and deletes the message; the
// sandbox bootstraps (a read, an update), reads its spec (the session, its
// persona) and reports ready (a read, an update); create reads the session
// ready.
func (f *floor) min(b *testing.B) time.Duration {
	c := f.calls(b)
	began := time.Now()
	for range 4 {
		c.get(f.registry, c.reg)
	}
	c.create()
	c.queue()
	c.get(f.sessions, c.sess)
	c.query(f.registry, resources.RegistryByKind, "kind", "floor-pool")
	c.transact(c.set(f.registry, c.reg), c.set(f.sessions, c.sess))
	c.deleteMessage()
	c.get(f.sessions, c.sess)
	c.update(f.sessions, c.sess)
	c.get(f.sessions, c.sess)
	c.get(f.registry, c.reg)
	c.get(f.sessions, c.sess)
	c.update(f.sessions, c.sess)
	c.get(f.sessions, c.sess)
	return time.Since(began)
}
