// Package bootstrap creates the resources of one environment (shared/resources)
// idempotently: what exists is left alone, what is missing is created, and tables
// are waited on until ACTIVE. The dev server, the tests and the LocalStack init hook
// all run it; running it twice creates nothing and fails nothing.
package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/resources"
)

// DynamoAPI is the part of the DynamoDB client the bootstrap calls.
type DynamoAPI interface {
	dynamodb.DescribeTableAPIClient
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// SQSAPI is the part of the SQS client the bootstrap calls.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// S3API is the part of the S3 client the bootstrap calls.
type S3API interface {
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, opts ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
	CreateBucket(ctx context.Context, in *s3.CreateBucketInput, opts ...func(*s3.Options)) (*s3.CreateBucketOutput, error)
}

// EventBridgeAPI is the part of the EventBridge client the bootstrap calls.
type EventBridgeAPI interface {
	CreateEventBus(ctx context.Context, in *eventbridge.CreateEventBusInput, opts ...func(*eventbridge.Options)) (*eventbridge.CreateEventBusOutput, error)
	DescribeRule(ctx context.Context, in *eventbridge.DescribeRuleInput, opts ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error)
	PutRule(ctx context.Context, in *eventbridge.PutRuleInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutRuleOutput, error)
	PutTargets(ctx context.Context, in *eventbridge.PutTargetsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutTargetsOutput, error)
}

// Clients are the service clients the bootstrap works through.
type Clients struct {
	DynamoDB DynamoAPI
	SQS      SQSAPI
	S3       S3API
	// EventBridge, where there is one (LocalStack), gets the jobs' bus and
	// its rule to the orchestrator queue; nil (the bundled emulators): none,
	// the publisher sends to the queue itself.
	EventBridge EventBridgeAPI
	// Region is where the bucket goes; us-east-1 needs no location constraint.
	Region string
}

// tableActiveTimeout bounds the wait for a new table to become ACTIVE.
const tableActiveTimeout = 5 * time.Minute

// Report says what a run found and did.
type Report struct {
	// Created and Existing name resources ("table ra-dev-sessions", …).
	Created  []string
	Existing []string
	// QueueURLs maps each queue name (dead-letter queues included) to its URL.
	QueueURLs map[string]string
}

// Run makes every resource of set exist.
func Run(ctx context.Context, c Clients, set resources.Set) (Report, error) {
	r := Report{QueueURLs: map[string]string{}}
	for _, t := range set.Tables() {
		if err := ensureTable(ctx, c.DynamoDB, t, &r); err != nil {
			return r, err
		}
	}
	for _, q := range set.Queues() {
		if err := ensureQueue(ctx, c.SQS, q, &r); err != nil {
			return r, err
		}
	}
	if err := ensureBucket(ctx, c.S3, c.Region, set.Bucket, &r); err != nil {
		return r, err
	}
	if c.EventBridge != nil {
		if err := ensureEventRule(ctx, c.EventBridge, c.SQS, set.JobEvents, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// ensureEventRule makes the bus, the rule forwarding its source's events and
// the rule's target queue exist (PutRule and PutTargets are idempotent).
func ensureEventRule(ctx context.Context, api EventBridgeAPI, queues SQSAPI, rule resources.EventRule, r *Report) error {
	_, err := api.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: &rule.Bus})
	var exists *ebtypes.ResourceAlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("create event bus %s: %w", rule.Bus, err)
	}
	r.note(err == nil, "event bus "+rule.Bus)
	_, err = api.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: &rule.Name, EventBusName: &rule.Bus})
	var missing *ebtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("describe rule %s: %w", rule.Name, err)
	}
	r.note(err != nil, "event rule "+rule.Name)
	pattern, err := json.Marshal(map[string][]string{"source": {rule.Source}})
	if err != nil {
		return fmt.Errorf("pattern of rule %s: %w", rule.Name, err)
	}
	if _, err := api.PutRule(ctx, &eventbridge.PutRuleInput{
		Name: &rule.Name, EventBusName: &rule.Bus, EventPattern: aws.String(string(pattern)), State: ebtypes.RuleStateEnabled,
	}); err != nil {
		return fmt.Errorf("put rule %s: %w", rule.Name, err)
	}
	url, ok := r.QueueURLs[rule.Queue]
	if !ok {
		return fmt.Errorf("rule %s: no queue %s", rule.Name, rule.Queue)
	}
	attrs, err := queues.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("get ARN of queue %s: %w", rule.Queue, err)
	}
	out, err := api.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: &rule.Name, EventBusName: &rule.Bus,
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}},
	})
	if err == nil && out.FailedEntryCount > 0 {
		err = fmt.Errorf("%d target(s) failed: %s", out.FailedEntryCount, aws.ToString(out.FailedEntries[0].ErrorMessage))
	}
	if err != nil {
		return fmt.Errorf("put target %s of rule %s: %w", rule.Queue, rule.Name, err)
	}
	return nil
}

func (r *Report) note(created bool, what string) {
	if created {
		r.Created = append(r.Created, what)
	} else {
		r.Existing = append(r.Existing, what)
	}
}

func ensureTable(ctx context.Context, api DynamoAPI, t resources.Table, r *Report) error {
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &t.Name})
	var missing *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		_, err := api.CreateTable(ctx, createTableInput(t))
		var inUse *ddbtypes.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // in use: created concurrently
			return fmt.Errorf("create table %s: %w", t.Name, err)
		}
		r.note(err == nil, "table "+t.Name)
		if t.Stream {
			r.note(err == nil, "stream "+t.Name)
		}
	case err != nil:
		return fmt.Errorf("describe table %s: %w", t.Name, err)
	default:
		if err := sameKeys(t, desc.Table); err != nil {
			return err
		}
		r.note(false, "table "+t.Name)
		if err := ensureStream(ctx, api, t, desc.Table, r); err != nil {
			return err
		}
	}
	w := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &t.Name}, tableActiveTimeout); err != nil {
		return fmt.Errorf("wait for table %s: %w", t.Name, err)
	}
	return ensureTTL(ctx, api, t, r)
}

// ensureStream turns on the stream of a table made before it had one.
func ensureStream(ctx context.Context, api DynamoAPI, t resources.Table, desc *ddbtypes.TableDescription, r *Report) error {
	if !t.Stream {
		return nil
	}
	if spec := desc.StreamSpecification; spec != nil && aws.ToBool(spec.StreamEnabled) {
		r.note(false, "stream "+t.Name)
		return nil
	}
	if _, err := api.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: &t.Name, StreamSpecification: streamSpec()}); err != nil {
		return fmt.Errorf("enable the stream of %s: %w", t.Name, err)
	}
	r.note(true, "stream "+t.Name)
	return nil
}

// streamSpec is the stream the tables that have one have: new images.
func streamSpec() *ddbtypes.StreamSpecification {
	return &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage}
}

func ensureTTL(ctx context.Context, api DynamoAPI, t resources.Table, r *Report) error {
	if t.TTLAttribute == "" {
		return nil
	}
	ttl, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &t.Name})
	if err != nil {
		return fmt.Errorf("describe TTL of %s: %w", t.Name, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == t.TTLAttribute &&
		(d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling) {
		r.note(false, "ttl "+t.Name+"."+t.TTLAttribute)
		return nil
	}
	if _, err := api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &t.Name,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{
			AttributeName: &t.TTLAttribute,
			Enabled:       aws.Bool(true),
		},
	}); err != nil {
		return fmt.Errorf("enable TTL on %s: %w", t.Name, err)
	}
	r.note(true, "ttl "+t.Name+"."+t.TTLAttribute)
	return nil
}

func createTableInput(t resources.Table) *dynamodb.CreateTableInput {
	var attrs []ddbtypes.AttributeDefinition
	seen := map[string]bool{}
	define := func(k resources.Key) {
		if !seen[k.Name] {
			seen[k.Name] = true
			attrs = append(attrs, ddbtypes.AttributeDefinition{
				AttributeName: aws.String(k.Name),
				AttributeType: ddbtypes.ScalarAttributeType(k.Type),
			})
		}
	}
	schema := func(pk resources.Key, sk *resources.Key) []ddbtypes.KeySchemaElement {
		define(pk)
		s := []ddbtypes.KeySchemaElement{{AttributeName: aws.String(pk.Name), KeyType: ddbtypes.KeyTypeHash}}
		if sk != nil {
			define(*sk)
			s = append(s, ddbtypes.KeySchemaElement{AttributeName: aws.String(sk.Name), KeyType: ddbtypes.KeyTypeRange})
		}
		return s
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(t.Name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		KeySchema:   schema(t.PartitionKey, t.SortKey),
	}
	if t.Stream {
		in.StreamSpecification = streamSpec()
	}
	for _, ix := range t.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  schema(ix.PartitionKey, ix.SortKey),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll},
		})
	}
	in.AttributeDefinitions = attrs
	return in
}

// sameKeys refuses a table that exists with other keys or without an index:
// creating nothing would then leave the code running against the wrong schema.
func sameKeys(t resources.Table, got *ddbtypes.TableDescription) error {
	want := createTableInput(t)
	keyNames := func(ks []ddbtypes.KeySchemaElement) []string {
		var out []string
		for _, k := range ks {
			out = append(out, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		return out
	}
	if !slices.Equal(keyNames(want.KeySchema), keyNames(got.KeySchema)) {
		return fmt.Errorf("table %s exists with key schema %v, want %v", t.Name, keyNames(got.KeySchema), keyNames(want.KeySchema))
	}
	for _, ix := range want.GlobalSecondaryIndexes {
		i := slices.IndexFunc(got.GlobalSecondaryIndexes, func(g ddbtypes.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(g.IndexName) == aws.ToString(ix.IndexName)
		})
		if i < 0 || !slices.Equal(keyNames(ix.KeySchema), keyNames(got.GlobalSecondaryIndexes[i].KeySchema)) {
			return fmt.Errorf("table %s exists without index %s as defined", t.Name, aws.ToString(ix.IndexName))
		}
	}
	return nil
}

func ensureQueue(ctx context.Context, api SQSAPI, q resources.Queue, r *Report) error {
	dlqURL, err := ensureOneQueue(ctx, api, q.DeadLetterName, map[string]string{
		"MessageRetentionPeriod": seconds(q.DeadLetterRetention),
	}, r)
	if err != nil {
		return err
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &dlqURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("get ARN of queue %s: %w", q.DeadLetterName, err)
	}
	arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		return fmt.Errorf("queue %s has no ARN", q.DeadLetterName)
	}
	redrive, err := json.Marshal(map[string]string{
		"deadLetterTargetArn": arn,
		"maxReceiveCount":     strconv.Itoa(q.MaxReceiveCount),
	})
	if err != nil {
		return fmt.Errorf("redrive policy of %s: %w", q.Name, err)
	}
	_, err = ensureOneQueue(ctx, api, q.Name, map[string]string{
		"VisibilityTimeout":      seconds(q.VisibilityTimeout),
		"MessageRetentionPeriod": seconds(q.Retention),
		"RedrivePolicy":          string(redrive),
	}, r)
	return err
}

func ensureOneQueue(ctx context.Context, api SQSAPI, name string, attrs map[string]string, r *Report) (string, error) {
	got, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	if err == nil {
		r.note(false, "queue "+name)
		r.QueueURLs[name] = aws.ToString(got.QueueUrl)
		return aws.ToString(got.QueueUrl), nil
	}
	if !queueMissing(err) {
		return "", fmt.Errorf("look up queue %s: %w", name, err)
	}
	// CreateQueue is itself idempotent for equal attributes, so a concurrent
	// creator is no error.
	made, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	r.note(true, "queue "+name)
	r.QueueURLs[name] = aws.ToString(made.QueueUrl)
	return aws.ToString(made.QueueUrl), nil
}

// queueMissing recognises "no such queue" by type (JSON protocol) or by code (query
// protocol and emulators that send only a code).
func queueMissing(err error) bool {
	var missing *sqstypes.QueueDoesNotExist
	if errors.As(err, &missing) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist":
			return true
		}
	}
	return false
}

func ensureBucket(ctx context.Context, api S3API, region string, b resources.Bucket, r *Report) error {
	_, err := api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.Name})
	if err == nil {
		r.note(false, "bucket "+b.Name)
		return nil
	}
	if !bucketMissing(err) {
		return fmt.Errorf("look up bucket %s: %w", b.Name, err)
	}
	in := &s3.CreateBucketInput{Bucket: &b.Name}
	if region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{
			LocationConstraint: s3types.BucketLocationConstraint(region),
		}
	}
	_, err = api.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", b.Name, err)
	}
	r.note(err == nil, "bucket "+b.Name)
	return nil
}

// bucketMissing recognises HeadBucket's 404, typed or by code.
func bucketMissing(err error) bool {
	var notFound *s3types.NotFound
	if errors.As(err, &notFound) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NotFound" || api.ErrorCode() == "NoSuchBucket")
}

func seconds(d time.Duration) string {
	return strconv.Itoa(int(d / time.Second))
}

// ClientsFor returns the clients of cfg, built the way every process builds
// them; EventBridge's only where its endpoint is overridden (LocalStack: the
// bootstrap is not run against AWS, whose stack makes the bus).
func ClientsFor(cfg aws.Config) Clients {
	c := Clients{
		DynamoDB: awsconfig.NewDynamoDB(cfg),
		SQS:      awsconfig.NewSQS(cfg),
		S3:       awsconfig.NewS3(cfg),
		Region:   cfg.Region,
	}
	if awsconfig.Endpoint(awsconfig.EventBridge) != "" {
		c.EventBridge = eventbridge.NewFromConfig(cfg)
	}
	return c
}
