// Package queuepub publishes the orchestrator jobs' events straight onto the
// orchestrator queue, for the bundled emulators, which have no EventBridge.
//
// Each event is sent as the message an EventBridge rule's SQS target would
// deliver: the jobevents.Envelope, with version "0", detail-type, source
// jobevents.Source, the account and region given, time to the second in UTC,
// resources [jobevents.Resource(e)] and the spec's payload as detail. So the
// orchestrator reads the same bytes on AWS, on LocalStack and here. The
// envelope's id is a UUID derived from the event's stable id (EventBridge's is
// random); the orchestrator deduplicates by the resource on every transport.
package queuepub

import (
	"context"
	"crypto/sha1" //nolint:gosec // a name-based UUID (RFC 9562 version 5), not a secret
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/retry"
)

var _ jobevents.Publisher = (*Publisher)(nil)

// LocalAccount is the account the envelopes of local runs name (LocalStack's).
const LocalAccount = "000000000000"

// Retry defaults for messages the queue did not take.
const (
	DefaultAttempts   = 5
	DefaultBaseDelay  = 100 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
)

// Publisher sends job events to one queue.
type Publisher struct {
	q       queue.Queue
	account string
	region  string
	retry   retry.Policy
}

// Option configures a Publisher.
type Option func(*Publisher)

// WithRetry sets how many times a message is tried in all (at least 1) and
// the backoff between tries: full jitter, doubling from base, at most max.
func WithRetry(attempts int, base, maxBackoff time.Duration) Option {
	return func(p *Publisher) {
		p.retry.Attempts, p.retry.Base, p.retry.Max = max(attempts, 1), base, maxBackoff
	}
}

// WithNotify has notify told each wait between tries before it is waited
// (tests record them).
func WithNotify(notify func(wait time.Duration)) Option {
	return func(p *Publisher) { p.retry.Notify = notify }
}

// New returns a publisher onto q whose envelopes name account and region.
func New(q queue.Queue, account, region string, opts ...Option) *Publisher {
	p := &Publisher{q: q, account: account, region: region, retry: retry.Policy{Attempts: DefaultAttempts, Base: DefaultBaseDelay, Max: DefaultMaxBackoff}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Envelope is the envelope EventBridge would deliver for e from account and
// region.
func Envelope(e jobevents.Event, account, region string) (jobevents.Envelope, error) {
	switch {
	case e.ID == "":
		return jobevents.Envelope{}, errors.New("event without an id")
	case e.Detail.JobID == "":
		return jobevents.Envelope{}, errors.New("event without a job id")
	case e.Type == "":
		return jobevents.Envelope{}, errors.New("event without a type")
	case e.Time.IsZero():
		return jobevents.Envelope{}, errors.New("event without a time")
	}
	detail, err := json.Marshal(e.Detail)
	if err != nil {
		return jobevents.Envelope{}, fmt.Errorf("encode detail: %w", err)
	}
	return jobevents.Envelope{
		Version:    "0",
		ID:         uuidFor(e.ID),
		DetailType: e.Type,
		Source:     jobevents.Source,
		Account:    account,
		Time:       e.Time.UTC().Format("2006-01-02T15:04:05Z"),
		Region:     region,
		Resources:  []string{jobevents.Resource(e)},
		Detail:     detail,
	}, nil
}

// Publish sends one message per event. Messages the queue did not take are
// sent again after a bounded backoff, unless resending would fail again; an
// error lists the events still not sent (the others were). Calling Publish
// again with the same events is safe: the orchestrator drops copies.
func (p *Publisher) Publish(ctx context.Context, events ...jobevents.Event) error {
	entries := make([]queue.Entry, 0, len(events))
	byEntry := map[string]string{} // entry id to event id
	for i, e := range events {
		env, err := Envelope(e, p.account, p.region)
		if err != nil {
			return fmt.Errorf("publish job event %q: %w", e.ID, err)
		}
		body, err := json.Marshal(env)
		if err != nil {
			return fmt.Errorf("publish job event %q: %w", e.ID, err)
		}
		id := strconv.Itoa(i) // batch ids: alphanumerics, unique in the call
		byEntry[id] = e.ID
		entries = append(entries, queue.Entry{ID: id, Body: string(body)})
	}
	if len(entries) == 0 {
		return nil
	}
	var sendErr error // the queue's own failure, returned as it is
	err := retry.Do(ctx, p.retry, func() error {
		failures, err := p.q.SendBatch(ctx, entries)
		if err != nil {
			sendErr = fmt.Errorf("publish %d job event(s): %w", len(entries), err)
			return retry.Permanent(sendErr)
		}
		if len(failures) == 0 {
			return nil
		}
		failed := map[string]bool{}
		final := false
		var msgs []string
		for _, f := range failures {
			failed[f.ID] = true
			final = final || f.SenderFault
			msgs = append(msgs, byEntry[f.ID]+": "+f.Code+" "+f.Message)
		}
		err = fmt.Errorf("%d not sent: %s", len(failures), strings.Join(msgs, "; "))
		if final {
			return retry.Permanent(err)
		}
		again := entries[:0:0]
		for _, e := range entries {
			if failed[e.ID] {
				again = append(again, e)
			}
		}
		entries = again
		return err
	})
	switch {
	case err == nil:
		return nil
	case sendErr != nil:
		return sendErr
	}
	return fmt.Errorf("publish job events: %w", err)
}

// uuidFor is the name-based UUID (version 5, in a namespace of our own) of name.
func uuidFor(name string) string {
	h := sha1.Sum([]byte("remote-agents.jobs/" + name)) //nolint:gosec // see the import
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	s := hex.EncodeToString(h[:16])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}
