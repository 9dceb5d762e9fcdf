// Package eventbus publishes the orchestrator jobs' events (package jobevents)
// on an Amazon EventBridge bus with PutEvents: on AWS, and on LocalStack when
// AWS_ENDPOINT_URL points at it.
//
// Each event becomes one entry: Source jobevents.Source, DetailType the event's
// type, Detail the spec's payload as JSON, Time the event's time, and one
// resource, jobevents.Resource (the stable event id the orchestrator
// deduplicates by; EventBridge picks the envelope's id itself). Entries go in
// requests of at most MaxBatchEntries entries and MaxBatchBytes bytes
// (EventBridge's entry size). Entries a request reports as failed
// (FailedEntryCount, each entry's ErrorCode) are sent again, alone, after a
// bounded backoff; a failure EventBridge will repeat (a malformed detail, a
// missing bus, access denied) is not retried. Order within one Publish is not
// kept on retries; EventBridge does not keep it either.
package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/retry"
)

// API is the part of the EventBridge client the adapter calls;
// *eventbridge.Client has it.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var (
	_ API                 = (*eventbridge.Client)(nil)
	_ jobevents.Publisher = (*Bus)(nil)
)

// EventBridge's limits on one PutEvents request.
const (
	MaxBatchEntries = 10
	MaxBatchBytes   = 256 * 1024
	// timeBytes is what an entry's Time counts for in its size.
	timeBytes = 14
)

// Retry defaults for entries a request reports as failed.
const (
	DefaultAttempts   = 5
	DefaultBaseDelay  = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
)

// permanent are the entry error codes EventBridge would answer again: the
// entry is not retried.
var permanent = []string{
	"MalformedDetail", "InvalidArgument", "ValidationException", "AccessDeniedException",
	"NotAuthorizedForSourceException", "NotAuthorizedForDetailTypeException", "ResourceNotFoundException",
}

// Bus publishes on one event bus.
type Bus struct {
	api   API
	name  string
	retry retry.Policy
}

// Option configures a Bus.
type Option func(*Bus)

// WithRetry sets how many times a failed entry is tried in all (at least 1)
// and the backoff between tries: full jitter, doubling from base, at most max.
func WithRetry(attempts int, base, maxBackoff time.Duration) Option {
	return func(b *Bus) {
		b.retry.Attempts, b.retry.Base, b.retry.Max = max(attempts, 1), base, maxBackoff
	}
}

// WithNotify has notify told each wait between tries before it is waited
// (tests record them).
func WithNotify(notify func(wait time.Duration)) Option {
	return func(b *Bus) { b.retry.Notify = notify }
}

// New returns the bus called name (jobevents.BusName(env)), reached through api.
func New(api API, name string, opts ...Option) *Bus {
	b := &Bus{api: api, name: name, retry: retry.Policy{Attempts: DefaultAttempts, Base: DefaultBaseDelay, Max: DefaultMaxBackoff}}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Name returns the bus's name.
func (b *Bus) Name() string { return b.name }

// EntryFailure is an event EventBridge did not take.
type EntryFailure struct {
	EventID string
	Code    string
	Message string
}

// PublishError lists the events still failed after every try; the events of
// the same Publish not listed were taken.
type PublishError struct {
	Bus    string
	Failed []EntryFailure
}

func (e *PublishError) Error() string {
	codes := make([]string, 0, len(e.Failed))
	for _, f := range e.Failed {
		codes = append(codes, f.EventID+": "+f.Code+" "+f.Message)
	}
	return fmt.Sprintf("put %d job event(s) on bus %s failed: %s", len(e.Failed), e.Bus, strings.Join(codes, "; "))
}

type entry struct {
	id    string
	entry types.PutEventsRequestEntry
	size  int
}

// Publish puts events on the bus. It returns a *PublishError when an entry
// still fails after its tries, the SDK's (classified) error when a request
// fails as a whole, and an error before sending anything for an event that
// cannot be an entry (no id or job id, or over MaxBatchBytes). Every event
// before the failing request was taken; calling Publish again with the same
// events is safe (the orchestrator drops copies by their resource).
func (b *Bus) Publish(ctx context.Context, events ...jobevents.Event) error {
	entries := make([]entry, 0, len(events))
	for _, e := range events {
		en, err := b.entry(e)
		if err != nil {
			return fmt.Errorf("publish job event %q on bus %s: %w", e.ID, b.name, err)
		}
		entries = append(entries, en)
	}
	for len(entries) > 0 {
		n, bytes := 0, 0
		for n < len(entries) && n < MaxBatchEntries && bytes+entries[n].size <= MaxBatchBytes {
			bytes += entries[n].size
			n++
		}
		if err := b.put(ctx, entries[:n]); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

func (b *Bus) entry(e jobevents.Event) (entry, error) {
	switch {
	case e.ID == "":
		return entry{}, errors.New("event without an id")
	case e.Detail.JobID == "":
		return entry{}, errors.New("event without a job id")
	case e.Type == "":
		return entry{}, errors.New("event without a type")
	}
	detail, err := json.Marshal(e.Detail)
	if err != nil {
		return entry{}, fmt.Errorf("encode detail: %w", err)
	}
	at := e.Time
	if at.IsZero() {
		return entry{}, errors.New("event without a time")
	}
	resource := jobevents.Resource(e)
	en := types.PutEventsRequestEntry{
		EventBusName: aws.String(b.name),
		Source:       aws.String(jobevents.Source),
		DetailType:   aws.String(string(e.Type)),
		Detail:       aws.String(string(detail)),
		Time:         aws.Time(at.UTC()),
		Resources:    []string{resource},
	}
	size := timeBytes + len(jobevents.Source) + len(e.Type) + len(detail) + len(resource)
	if size > MaxBatchBytes {
		return entry{}, fmt.Errorf("entry of %d bytes exceeds EventBridge's %d", size, MaxBatchBytes)
	}
	return entry{id: e.ID, entry: en, size: size}, nil
}

// put sends one request's entries, then again those that failed and may pass
// (alone), until none is left or the tries are spent.
func (b *Bus) put(ctx context.Context, batch []entry) error {
	var given []EntryFailure // failures EventBridge would repeat: not retried
	err := retry.Do(ctx, b.retry, func() error {
		in := &eventbridge.PutEventsInput{Entries: make([]types.PutEventsRequestEntry, len(batch))}
		for i, e := range batch {
			in.Entries[i] = e.entry
		}
		out, err := b.api.PutEvents(ctx, in)
		if err != nil {
			return retry.Permanent(fmt.Errorf("put %d job event(s) on bus %s: %w", len(batch), b.name, awserr.Classify(err)))
		}
		var again []entry
		var failed []EntryFailure
		if out.FailedEntryCount > 0 || len(out.Entries) < len(batch) {
			// Entries answer in the order of the request; one with an
			// ErrorCode failed, one not answered is not known taken.
			for i, e := range batch {
				f := EntryFailure{EventID: e.id, Code: "Unanswered"}
				if i < len(out.Entries) {
					r := out.Entries[i]
					if r.ErrorCode == nil {
						continue
					}
					f.Code, f.Message = aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage)
				}
				if slices.Contains(permanent, f.Code) {
					given = append(given, f)
					continue
				}
				failed = append(failed, f)
				again = append(again, e)
			}
		}
		batch = again
		all := append(slices.Clone(given), failed...)
		switch {
		case len(all) == 0:
			return nil
		case len(again) == 0:
			return retry.Permanent(&PublishError{Bus: b.name, Failed: all})
		}
		return &PublishError{Bus: b.name, Failed: all}
	})
	if ie := (*retry.InterruptedError)(nil); errors.As(err, &ie) {
		return fmt.Errorf("put job events on bus %s: %w", b.name, err)
	}
	return err
}
