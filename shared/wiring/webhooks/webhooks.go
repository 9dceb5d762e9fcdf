// Package webhooks builds the webhooks function: it reads the events
// table's stream (a trigger per agent whose stream grew) and consumes the
// webhooks queue (deliveries, retries, replays).
package webhooks

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/webhook"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/webhookservice"
)

// Build builds the webhooks function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	d, err := webhookservice.Deliverer(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	q, err := e.WebhooksQueue(ctx)
	if err != nil {
		return wiring.Function{}, err
	}
	return wiring.Function{
		Name: routes.Webhooks,
		// Each trigger on its own: a failed one is retried alone.
		Worker: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var res events.SQSEventResponse
			for _, r := range ev.Records {
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) < webhook.RunLimit {
					// Not enough time left for a whole run: the
					// trigger comes back to another invocation.
					res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
					continue
				}
				if err := d.Handle(ctx, r.Body); err != nil {
					e.Log.WarnContext(ctx, "webhooks: delivery run failed; the trigger is retried",
						"message_id", r.MessageId, "error", err.Error())
					res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				}
			}
			return res, nil
		},
		// A batch of the stream: one trigger per agent with an event to
		// deliver; a batch whose triggers cannot be sent is retried (the
		// stream keeps it).
		Changes: func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			written := make([]session.Event, 0, len(ev.Records))
			for _, r := range ev.Records {
				if r.EventName != string(events.DynamoDBOperationTypeInsert) {
					continue
				}
				img := r.Change.NewImage
				written = append(written, session.Event{SessionID: img["session_id"].String(), Type: img["type"].String()})
			}
			if err := webhook.Announce(ctx, q, written); err != nil {
				e.Log.WarnContext(ctx, "webhooks: triggers not sent; the stream's batch is retried",
					"records", strconv.Itoa(len(ev.Records)), "error", err.Error())
				return events.DynamoDBEventResponse{}, err
			}
			return events.DynamoDBEventResponse{}, nil
		},
	}, nil
}
