// Package sqsqueue implements queue.Queue on Amazon SQS (standard queues).
//
// Batch sends are judged by the reply's Failed list alone: an entry that is not
// listed there was sent. That holds against SQS itself and against emulators whose
// Successful list is unreliable.
package sqsqueue

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/queue"
)

// API is the part of the SQS client the adapter calls; *sqs.Client has it.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var (
	_ API         = (*sqs.Client)(nil)
	_ queue.Queue = (*Queue)(nil)
)

// Limits SQS puts on delays and visibility timeouts.
const (
	maxDelay      = 15 * time.Minute
	maxVisibility = 12 * time.Hour
)

// Codes of failures the adapter finds before sending.
const (
	CodeInvalidMessage = "InvalidMessageContents"
	CodeRequestFailed  = "RequestFailed"
)

// Queue is one SQS queue, addressed by its URL.
type Queue struct {
	api API
	url string
}

// New returns the queue at url, reached through api.
func New(api API, url string) *Queue {
	return &Queue{api: api, url: url}
}

// URL returns the queue's URL.
func (q *Queue) URL() string { return q.url }

// Send enqueues one message.
func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) (string, error) {
	if err := validBody(body); err != nil {
		return "", fmt.Errorf("send to %s: %w", q.url, err)
	}
	d, err := delaySeconds(delay)
	if err != nil {
		return "", fmt.Errorf("send to %s: %w", q.url, err)
	}
	res, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     &q.url,
		MessageBody:  &body,
		DelaySeconds: d,
	})
	if err != nil {
		return "", fmt.Errorf("send to %s: %w", q.url, awserr.Classify(err))
	}
	return aws.ToString(res.MessageId), nil
}

// SendBatch enqueues entries, split into requests of at most queue.MaxBatchSize
// entries and queue.MaxBatchBytes. Entries the queue could never carry fail alone,
// before sending; a request that fails as a whole fails each of its entries, and
// the other requests still go.
func (q *Queue) SendBatch(ctx context.Context, entries []queue.Entry) ([]queue.Failure, error) {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.ID == "" || seen[e.ID] {
			return nil, fmt.Errorf("send batch to %s: entry ids must be distinct and not empty (%q)", q.url, e.ID)
		}
		seen[e.ID] = true
	}
	var failures []queue.Failure
	var chunk []types.SendMessageBatchRequestEntry
	chunkBytes := 0
	flush := func() {
		if len(chunk) > 0 {
			failures = append(failures, q.sendChunk(ctx, chunk)...)
		}
		chunk, chunkBytes = nil, 0
	}
	for _, e := range entries {
		if err := validBody(e.Body); err != nil {
			failures = append(failures, queue.Failure{ID: e.ID, Code: CodeInvalidMessage, Message: err.Error(), SenderFault: true})
			continue
		}
		d, err := delaySeconds(e.Delay)
		if err != nil {
			failures = append(failures, queue.Failure{ID: e.ID, Code: CodeInvalidMessage, Message: err.Error(), SenderFault: true})
			continue
		}
		if len(chunk) == queue.MaxBatchSize || chunkBytes+len(e.Body) > queue.MaxBatchBytes {
			flush()
		}
		chunk = append(chunk, types.SendMessageBatchRequestEntry{
			Id:           aws.String(e.ID),
			MessageBody:  aws.String(e.Body),
			DelaySeconds: d,
		})
		chunkBytes += len(e.Body)
	}
	flush()
	return failures, nil
}

func (q *Queue) sendChunk(ctx context.Context, chunk []types.SendMessageBatchRequestEntry) []queue.Failure {
	res, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q.url, Entries: chunk})
	if err != nil {
		failures := make([]queue.Failure, len(chunk))
		for i, e := range chunk {
			failures[i] = queue.Failure{ID: aws.ToString(e.Id), Code: CodeRequestFailed, Message: err.Error()}
		}
		return failures
	}
	failures := make([]queue.Failure, 0, len(res.Failed))
	for _, f := range res.Failed {
		failures = append(failures, queue.Failure{
			ID:          aws.ToString(f.Id),
			Code:        aws.ToString(f.Code),
			Message:     aws.ToString(f.Message),
			SenderFault: f.SenderFault,
		})
	}
	return failures
}

// Receive long-polls for messages.
func (q *Queue) Receive(ctx context.Context, maxMessages int, wait time.Duration) ([]queue.Message, error) {
	if maxMessages < 1 || maxMessages > queue.MaxReceive {
		return nil, fmt.Errorf("receive from %s: max %d outside 1..%d", q.url, maxMessages, queue.MaxReceive)
	}
	if wait < 0 || wait > queue.MaxWait {
		return nil, fmt.Errorf("receive from %s: wait %s outside 0..%s", q.url, wait, queue.MaxWait)
	}
	res, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &q.url,
		MaxNumberOfMessages:         int32(maxMessages),
		WaitTimeSeconds:             int32(wait / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", q.url, awserr.Classify(err))
	}
	msgs := make([]queue.Message, len(res.Messages))
	for i, m := range res.Messages {
		count, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		msgs[i] = queue.Message{
			ID:            aws.ToString(m.MessageId),
			Body:          aws.ToString(m.Body),
			ReceiptHandle: aws.ToString(m.ReceiptHandle),
			ReceiveCount:  count,
		}
	}
	return msgs, nil
}

// Delete removes a received message.
func (q *Queue) Delete(ctx context.Context, receiptHandle string) error {
	if _, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: &receiptHandle}); err != nil {
		return fmt.Errorf("delete from %s: %w", q.url, awserr.Classify(err))
	}
	return nil
}

// ChangeVisibility sets how long until a received message is visible again.
func (q *Queue) ChangeVisibility(ctx context.Context, receiptHandle string, d time.Duration) error {
	if d < 0 || d > maxVisibility {
		return fmt.Errorf("change visibility on %s: %s outside 0..%s", q.url, d, maxVisibility)
	}
	if _, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          &q.url,
		ReceiptHandle:     &receiptHandle,
		VisibilityTimeout: int32(d / time.Second),
	}); err != nil {
		return fmt.Errorf("change visibility on %s: %w", q.url, awserr.Classify(err))
	}
	return nil
}

func delaySeconds(d time.Duration) (int32, error) {
	if d < 0 || d > maxDelay {
		return 0, fmt.Errorf("%w: delay %s outside 0..%s", queue.ErrInvalidMessage, d, maxDelay)
	}
	return int32(d / time.Second), nil
}

// validBody checks what SQS checks of a body: not empty, at most MaxBodyBytes, and
// only the characters it allows (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
// #x10000-#x10FFFF).
func validBody(body string) error {
	if body == "" {
		return fmt.Errorf("%w: empty body", queue.ErrInvalidMessage)
	}
	if len(body) > queue.MaxBodyBytes {
		return fmt.Errorf("%w: body of %d bytes exceeds %d", queue.ErrInvalidMessage, len(body), queue.MaxBodyBytes)
	}
	for i, r := range body {
		ok := r == 0x9 || r == 0xA || r == 0xD ||
			(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
		if !ok || (r == utf8.RuneError && !validRuneAt(body, i)) {
			return fmt.Errorf("%w: character %U at byte %d is not allowed", queue.ErrInvalidMessage, r, i)
		}
	}
	return nil
}

// validRuneAt tells a real U+FFFD in body from a decoding error at byte i.
func validRuneAt(body string, i int) bool {
	_, size := utf8.DecodeRuneInString(body[i:])
	return size == 3
}
