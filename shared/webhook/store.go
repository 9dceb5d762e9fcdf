package webhook

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is a store's error for an endpoint that is not there.
var ErrNotFound = errors.New("webhook endpoint not found")

// ErrLimit is CreateEndpoint's error when the app holds its most.
var ErrLimit = errors.New("webhook endpoints at their limit")

// Cursor is how far an endpoint's live deliveries of one stream went, and
// who is delivering them now.
type Cursor struct {
	Endpoint string `json:"endpoint"`
	Stream   string `json:"stream"`
	// After is the last sequence number the endpoint took (or that was
	// dead-lettered, or that it does not want).
	After int64 `json:"after"`
	// Attempts, FirstAttemptAt, FirstFailedAt and NextAt are about the
	// event after After while it is being retried.
	Attempts       int       `json:"attempts,omitempty"`
	FirstAttemptAt time.Time `json:"first_attempt_at,omitzero"`
	FirstFailedAt  time.Time `json:"first_failed_at,omitzero"`
	NextAt         time.Time `json:"next_at,omitzero"`
	// Holder holds the cursor until LeaseUntil: one delivery at a time.
	Holder     string    `json:"holder,omitempty"`
	LeaseUntil time.Time `json:"-"`
}

// The statuses of a delivery.
const (
	StatusDelivered        = "delivered"
	StatusRetrying         = "retrying"
	StatusDeadLettered     = "dead_lettered"
	StatusEndpointDisabled = "endpoint_disabled"
)

// Delivery is one entry of an endpoint's delivery log: one message, live
// or replayed, over all its attempts.
type Delivery struct {
	Endpoint string `json:"-"`
	// Key orders the log (newest first) and names the entry each attempt
	// updates.
	Key           string     `json:"-"`
	MessageID     string     `json:"webhook_id"`
	Type          string     `json:"type"`
	AgentID       string     `json:"agent_id,omitempty"`
	Sequence      int64      `json:"sequence"`
	Replay        bool       `json:"replay,omitempty"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	ResponseCode  int        `json:"response_code,omitempty"`
	Error         string     `json:"error,omitempty"`
	LatencyMS     int64      `json:"latency_ms"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// Store keeps endpoints, cursors and the delivery log (package dynamo's
// Webhooks; webhooktest.Memory).
type Store interface {
	// CreateEndpoint stores a new endpoint: ErrLimit when its tenant
	// holds most already.
	CreateEndpoint(ctx context.Context, ep Endpoint, most int) error
	// Endpoint reads one of tenant's endpoints: ErrNotFound.
	Endpoint(ctx context.Context, tenant, id string) (Endpoint, error)
	// Endpoints lists tenant's endpoints, oldest first.
	Endpoints(ctx context.Context, tenant string) ([]Endpoint, error)
	// PutEndpoint replaces an endpoint that exists: ErrNotFound.
	PutEndpoint(ctx context.Context, ep Endpoint) error
	// DeleteEndpoint deletes one of tenant's endpoints: ErrNotFound.
	DeleteEndpoint(ctx context.Context, tenant, id string) error

	// Claim takes endpoint's cursor of stream for holder until until,
	// unless another holds it past now (ok false).
	Claim(ctx context.Context, endpoint, stream, holder string, now, until time.Time) (c Cursor, ok bool, err error)
	// Release stores c's progress and lets go of its lease, if c.Holder
	// still holds it (ok false otherwise, and nothing is stored).
	Release(ctx context.Context, c Cursor) (ok bool, err error)

	// LogDelivery puts d under (d.Endpoint, d.Key).
	LogDelivery(ctx context.Context, d Delivery) error
	// Deliveries lists endpoint's log, newest first, after the cursor
	// after ("" from the newest); next is "" on the last page.
	Deliveries(ctx context.Context, endpoint string, limit int, after string) (ds []Delivery, next string, err error)
}
