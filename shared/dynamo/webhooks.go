package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/webhook"
)

// Webhooks keeps the apps' webhook endpoints, the deliveries' cursors and
// their log in the registry table:
//
//   - an app's endpoints and their count: pk "webhooks#<tenant>", sk
//     "endpoint#<id>" and "count";
//   - an endpoint's cursor of each agent's stream and its delivery log: pk
//     "webhook#<endpoint>", sk "cursor#<agent>" and "delivery#<key>"
//     (kept webhook.LogRetention).
type Webhooks struct {
	table *Table
	now   func() time.Time
}

var _ webhook.Store = (*Webhooks)(nil)

// The partition key prefixes of the webhook items (as access grants them).
const (
	WebhookEndpointItems = access.WebhookEndpointItems
	WebhookItems         = access.WebhookItems
)

// NewWebhooks is the store over the registry table.
func NewWebhooks(api API, registryTable string) *Webhooks {
	return &Webhooks{table: NewTable(api, registryTable), now: time.Now}
}

type endpointItem struct {
	registryKey
	webhook.Endpoint
}

func endpointKey(tenant, id string) registryKey {
	return registryKey{PK: WebhookEndpointItems + tenant, SK: "endpoint#" + id}
}

func endpointCount(tenant string) registryKey {
	return registryKey{PK: WebhookEndpointItems + tenant, SK: "count"}
}

// CreateEndpoint implements webhook.Store: the endpoint and its tenant's
// count, in one transaction.
func (w *Webhooks) CreateEndpoint(ctx context.Context, ep webhook.Endpoint, most int) error {
	err := Transact(ctx, w.table.api, "",
		w.table.PutOp(endpointItem{endpointKey(ep.Tenant, ep.ID), ep}, expression.AttributeNotExists(expression.Name("pk"))),
		w.table.UpdateOp(endpointCount(ep.Tenant), countBy(1, w.now()), under(most)...))
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && len(canceled.Reasons) == 2 && canceled.Reasons[1] == "ConditionalCheckFailed" {
		return webhook.ErrLimit
	}
	if err != nil {
		return fmt.Errorf("create webhook endpoint: %w", err)
	}
	return nil
}

// Endpoint implements webhook.Store.
func (w *Webhooks) Endpoint(ctx context.Context, tenant, id string) (webhook.Endpoint, error) {
	var it endpointItem
	err := w.table.Get(ctx, endpointKey(tenant, id), &it)
	if errors.Is(err, ErrNotFound) {
		return webhook.Endpoint{}, webhook.ErrNotFound
	}
	return it.Endpoint, err
}

// Endpoints implements webhook.Store: one query of the app's partition.
func (w *Webhooks) Endpoints(ctx context.Context, tenant string) ([]webhook.Endpoint, error) {
	var items []endpointItem
	_, err := w.table.Query(ctx, Query{
		Key: expression.Key("pk").Equal(expression.Value(WebhookEndpointItems + tenant)).
			And(expression.Key("sk").BeginsWith("endpoint#")),
		Limit:      webhook.MaxEndpoints * 2,
		Consistent: true,
	}, &items)
	if err != nil {
		return nil, err
	}
	out := make([]webhook.Endpoint, 0, len(items))
	for _, it := range items {
		out = append(out, it.Endpoint)
	}
	slices.SortFunc(out, webhook.ByCreation)
	return out, nil
}

// PutEndpoint implements webhook.Store.
func (w *Webhooks) PutEndpoint(ctx context.Context, ep webhook.Endpoint) error {
	err := w.table.Put(ctx, endpointItem{endpointKey(ep.Tenant, ep.ID), ep}, expression.AttributeExists(expression.Name("pk")))
	if errors.Is(err, ErrConditionFailed) {
		return webhook.ErrNotFound
	}
	return err
}

// DeleteEndpoint implements webhook.Store: the endpoint and one of its
// tenant's count, in one transaction. Its cursors and log expire.
func (w *Webhooks) DeleteEndpoint(ctx context.Context, tenant, id string) error {
	err := Transact(ctx, w.table.api, "",
		w.table.DeleteOp(endpointKey(tenant, id), expression.AttributeExists(expression.Name("pk"))),
		w.table.UpdateOp(endpointCount(tenant), countBy(-1, w.now())))
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && len(canceled.Reasons) > 0 && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return webhook.ErrNotFound
	}
	return err
}

type cursorItem struct {
	registryKey
	webhook.Cursor
	// LeaseMS is LeaseUntil in epoch milliseconds (compared in conditions).
	LeaseMS   int64 `json:"lease_ms"`
	ExpiresAt int64 `json:"expires_at"`
}

func cursorKey(endpoint, stream string) registryKey {
	return registryKey{PK: WebhookItems + endpoint, SK: "cursor#" + stream}
}

// cursorRetention is how long a cursor outlives its last move: longer
// than any stream it follows.
const cursorRetention = 60 * 24 * time.Hour

// Claim implements webhook.Store: one conditional update.
func (w *Webhooks) Claim(ctx context.Context, endpoint, stream, holder string, now, until time.Time) (webhook.Cursor, bool, error) {
	up := expression.Set(expression.Name("holder"), expression.Value(holder)).
		Set(expression.Name("lease_ms"), expression.Value(until.UnixMilli())).
		Set(expression.Name("endpoint"), expression.Value(endpoint)).
		Set(expression.Name("stream"), expression.Value(stream)).
		Set(expression.Name("expires_at"), expression.Value(now.Add(cursorRetention).Unix()))
	h, lease := expression.Name("holder"), expression.Name("lease_ms")
	free := expression.AttributeNotExists(h).Or(h.Equal(expression.Value(""))).Or(h.Equal(expression.Value(holder))).
		Or(lease.LessThan(expression.Value(now.UnixMilli())))
	var it cursorItem
	err := w.table.Update(ctx, cursorKey(endpoint, stream), up, &it, free)
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		return webhook.Cursor{}, false, nil
	}
	if err != nil {
		return webhook.Cursor{}, false, err
	}
	it.LeaseUntil = time.UnixMilli(it.LeaseMS)
	return it.Cursor, true, nil
}

// Release implements webhook.Store: the cursor put back whole, on
// condition that c.Holder still holds it.
func (w *Webhooks) Release(ctx context.Context, c webhook.Cursor) (bool, error) {
	holder := c.Holder
	c.Holder, c.LeaseUntil = "", time.Time{}
	it := cursorItem{cursorKey(c.Endpoint, c.Stream), c, 0, w.now().Add(cursorRetention).Unix()}
	err := w.table.Put(ctx, it, expression.Name("holder").Equal(expression.Value(holder)))
	if errors.Is(err, ErrConditionFailed) {
		return false, nil
	}
	return err == nil, err
}

type deliveryItem struct {
	registryKey
	webhook.Delivery
	ExpiresAt int64 `json:"expires_at"`
}

// LogDelivery implements webhook.Store.
func (w *Webhooks) LogDelivery(ctx context.Context, d webhook.Delivery) error {
	it := deliveryItem{registryKey{PK: WebhookItems + d.Endpoint, SK: "delivery#" + d.Key}, d,
		d.CreatedAt.Add(webhook.LogRetention).Unix()}
	return w.table.Put(ctx, it)
}

// Deliveries implements webhook.Store: the log's sort keys, descending,
// below the cursor (itself a key of the same endpoint's log).
func (w *Webhooks) Deliveries(ctx context.Context, endpoint string, limit int, after string) ([]webhook.Delivery, string, error) {
	pk := expression.Key("pk").Equal(expression.Value(WebhookItems + endpoint))
	key := pk.And(expression.Key("sk").BeginsWith("delivery#"))
	if after != "" {
		key = pk.And(expression.Key("sk").Between(expression.Value("delivery#"), expression.Value("delivery#"+after)))
	}
	var items []deliveryItem
	_, err := w.table.Query(ctx, Query{Key: key, Limit: limit + 2, Descending: true}, &items)
	if err != nil {
		return nil, "", err
	}
	out := make([]webhook.Delivery, 0, limit)
	next := ""
	for _, it := range items {
		k := strings.TrimPrefix(it.SK, "delivery#")
		if k == after || it.SK == "delivery#" {
			continue
		}
		if len(out) == limit {
			next = out[len(out)-1].Key
			break
		}
		it.Key, it.Endpoint = k, endpoint
		out = append(out, it.Delivery)
	}
	return out, next, nil
}
