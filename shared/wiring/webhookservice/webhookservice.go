// Package webhookservice builds the webhook service and deliverer from an
// Env, for the agenttypes function (the app's routes) and the webhooks
// function (deliveries).
package webhookservice

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/webhook"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Addresses are the addresses deliveries may reach: public ones, and
// loopback where RA_WEBHOOKS_LOOPBACK says so.
func Addresses(e *wiring.Env) webhook.Addresses {
	return webhook.Addresses{Loopback: e.Config.WebhooksLoopback}
}

// Store is the webhook store over the registry table.
func Store(e *wiring.Env) *dynamo.Webhooks {
	s, _ := wiring.Once(e, storeKey{}, func() (*dynamo.Webhooks, error) {
		return dynamo.NewWebhooks(e.DynamoDB(), e.Resources.Registry.Name), nil
	})
	return s
}

type storeKey struct{}

// Service is the service of the app's webhook routes.
func Service(ctx context.Context, e *wiring.Env) (*webhook.Service, error) {
	q, err := e.WebhooksQueue(ctx)
	if err != nil {
		return nil, err
	}
	return &webhook.Service{Store: Store(e), Addresses: Addresses(e), Queue: q, Agents: e.SessionStore()}, nil
}

// Deliverer is what sends the deliveries.
func Deliverer(ctx context.Context, e *wiring.Env) (*webhook.Deliverer, error) {
	q, err := e.WebhooksQueue(ctx)
	if err != nil {
		return nil, err
	}
	dlq, err := e.WebhooksDLQ(ctx)
	if err != nil {
		return nil, err
	}
	return &webhook.Deliverer{Store: Store(e), Streams: e.SessionStore(), Queue: q, DLQ: dlq,
		Client: Addresses(e).Client(), Log: e.Log}, nil
}
