// Package orchestratorqueue publishes job events straight onto the
// orchestrator's queue, as the EventBridge envelope a rule's SQS target
// delivers (jobevents.Envelope): the same bytes the orchestrator reads on
// AWS, where the events go through the bus. It is the publisher of the
// bundled emulators, which have no EventBridge.
package orchestratorqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/remote-agents/remote-agents/shared/jobevents"
)

// Sender sends a message body to a queue (queue.Queue).
type Sender interface {
	Send(ctx context.Context, body string, delay time.Duration) (string, error)
}

// Publisher puts events on the orchestrator queue.
type Publisher struct {
	Queue   Sender
	Region  string
	Account string
}

var _ jobevents.Publisher = (*Publisher)(nil)

// Publish sends each event as its envelope, in order.
func (p *Publisher) Publish(ctx context.Context, events ...jobevents.Event) error {
	for _, e := range events {
		body, err := Envelope(e, p.Region, p.Account)
		if err != nil {
			return err
		}
		if _, err := p.Queue.Send(ctx, string(body), 0); err != nil {
			return fmt.Errorf("publish %s: %w", e.ID, err)
		}
	}
	return nil
}

// Envelope is the EventBridge envelope of e.
func Envelope(e jobevents.Event, region, account string) ([]byte, error) {
	d, err := json.Marshal(e.Detail)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.ID, err)
	}
	b, err := json.Marshal(jobevents.Envelope{Version: "0", ID: e.ID, DetailType: e.Type, Source: jobevents.Source, Account: account,
		Time: e.Time.UTC().Format(time.RFC3339), Region: region, Resources: []string{}, Detail: d})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.ID, err)
	}
	return b, nil
}
