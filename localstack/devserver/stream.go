package devserver

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Stream reading's pace: an idle stream is read once a second, at once
// after a write to its table (writeKicker); new shards are looked for
// every streamDiscovery and whenever one closes.
const (
	streamIdle      = time.Second
	streamDiscovery = 10 * time.Second
)

// followStream reads the events table's stream from its start and hands
// each batch of records to f.Changes, as a Lambda event source mapping
// does: a batch whose handling fails is handed again.
func followStream(ctx context.Context, e *wiring.Env, f wiring.Function, written <-chan struct{}, log *slog.Logger) {
	if f.Changes == nil {
		return
	}
	table := e.Resources.Events.Name
	desc, err := e.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil || desc.Table.LatestStreamArn == nil {
		if ctx.Err() == nil {
			log.Error("devserver: the events table has no stream: webhooks are not delivered", slog.Any("error", err))
		}
		return
	}
	client := dynamodbstreams.NewFromConfig(e.AWS, func(o *dynamodbstreams.Options) {
		if ep := awsconfig.Endpoint(awsconfig.DynamoDB); ep != "" {
			o.BaseEndpoint = aws.String(ep)
		}
	})
	r := &streamReader{client: client, arn: *desc.Table.LatestStreamArn, handle: f.Changes, name: f.Name, log: log,
		iterators: map[string]*string{}, done: map[string]bool{}}
	for ctx.Err() == nil {
		if time.Since(r.discovered) > streamDiscovery {
			r.discover(ctx)
		}
		if r.readAll(ctx) {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
		case <-written:
		case <-time.After(streamIdle):
		}
	}
}

type streamReader struct {
	client     *dynamodbstreams.Client
	arn        string
	handle     func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	name       string
	log        *slog.Logger
	iterators  map[string]*string // by shard id: where to read next
	done       map[string]bool    // shards read to their end
	discovered time.Time
}

// discover adds the shards not followed yet, from their start.
func (r *streamReader) discover(ctx context.Context) {
	r.discovered = time.Now()
	var start *string
	for {
		out, err := r.client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &r.arn, ExclusiveStartShardId: start})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("devserver: describe the events stream", slog.String("error", err.Error()))
			}
			return
		}
		for _, sh := range out.StreamDescription.Shards {
			id := aws.ToString(sh.ShardId)
			if _, ok := r.iterators[id]; ok || r.done[id] {
				continue
			}
			it, err := r.client.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: &r.arn, ShardId: sh.ShardId,
				ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				r.log.Warn("devserver: a shard iterator of the events stream", slog.String("shard", id), slog.String("error", err.Error()))
				continue
			}
			r.iterators[id] = it.ShardIterator
		}
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return
		}
	}
}

// readAll reads each followed shard once and hands on what it holds; it
// reports whether any shard had records.
func (r *streamReader) readAll(ctx context.Context) bool {
	got := false
	for id, it := range r.iterators {
		out, err := r.client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1000)})
		if err != nil {
			var trimmed *types.TrimmedDataAccessException
			if ctx.Err() == nil && !errors.As(err, &trimmed) { // trimmed: DynamoDB Local's new shard, not yet written
				r.log.Warn("devserver: read the events stream", slog.String("shard", id), slog.String("error", err.Error()))
			}
			r.discovered = time.Time{} // a fresh iterator next time
			delete(r.iterators, id)
			continue
		}
		if len(out.Records) > 0 {
			if _, err := r.handle(withFunction(ctx, r.name), batch(out.Records)); err != nil {
				continue // the same records again, from the same iterator, after a wait
			}
			got = true
		}
		if out.NextShardIterator == nil {
			delete(r.iterators, id)
			r.done[id] = true
			r.discovered = time.Time{} // its children
			continue
		}
		r.iterators[id] = out.NextShardIterator
	}
	return got
}

// batch is records as Lambda hands them to a function: the new images'
// string and number attributes (what the events' triggers read).
func batch(records []types.Record) events.DynamoDBEvent {
	ev := events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, 0, len(records))}
	for _, rec := range records {
		img := map[string]events.DynamoDBAttributeValue{}
		if rec.Dynamodb != nil {
			for k, v := range rec.Dynamodb.NewImage {
				switch v := v.(type) {
				case *types.AttributeValueMemberS:
					img[k] = events.NewStringAttribute(v.Value)
				case *types.AttributeValueMemberN:
					img[k] = events.NewNumberAttribute(v.Value)
				}
			}
		}
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventName: string(rec.EventName), EventSource: "aws:dynamodb",
			EventID: aws.ToString(rec.EventID), Change: events.DynamoDBStreamRecord{NewImage: img}})
	}
	return ev
}
