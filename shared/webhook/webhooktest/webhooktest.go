// Package webhooktest holds an in-memory webhook.Store and the contract
// every store passes (Run).
package webhooktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/webhook"
)

// Memory is a webhook.Store in memory.
type Memory struct {
	mu        sync.Mutex
	endpoints map[string]webhook.Endpoint // by id
	cursors   map[string]webhook.Cursor   // by endpoint#stream
	log       map[string]map[string]webhook.Delivery
}

var _ webhook.Store = (*Memory)(nil)

// NewMemory is an empty store.
func NewMemory() *Memory {
	return &Memory{endpoints: map[string]webhook.Endpoint{}, cursors: map[string]webhook.Cursor{}, log: map[string]map[string]webhook.Delivery{}}
}

// CreateEndpoint implements webhook.Store.
func (m *Memory) CreateEndpoint(_ context.Context, ep webhook.Endpoint, most int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.endpoints {
		if e.Tenant == ep.Tenant {
			n++
		}
	}
	if n >= most {
		return webhook.ErrLimit
	}
	if _, ok := m.endpoints[ep.ID]; ok {
		return fmt.Errorf("endpoint %s exists", ep.ID)
	}
	m.endpoints[ep.ID] = clone(ep)
	return nil
}

func clone(ep webhook.Endpoint) webhook.Endpoint {
	ep.Events = slices.Clone(ep.Events)
	return ep
}

// Endpoint implements webhook.Store.
func (m *Memory) Endpoint(_ context.Context, tenant, id string) (webhook.Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ep, ok := m.endpoints[id]
	if !ok || ep.Tenant != tenant {
		return webhook.Endpoint{}, webhook.ErrNotFound
	}
	return clone(ep), nil
}

// Endpoints implements webhook.Store.
func (m *Memory) Endpoints(_ context.Context, tenant string) ([]webhook.Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []webhook.Endpoint
	for _, ep := range m.endpoints {
		if ep.Tenant == tenant {
			out = append(out, clone(ep))
		}
	}
	slices.SortFunc(out, webhook.ByCreation)
	return out, nil
}

// PutEndpoint implements webhook.Store.
func (m *Memory) PutEndpoint(_ context.Context, ep webhook.Endpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.endpoints[ep.ID]
	if !ok || cur.Tenant != ep.Tenant {
		return webhook.ErrNotFound
	}
	m.endpoints[ep.ID] = clone(ep)
	return nil
}

// DeleteEndpoint implements webhook.Store.
func (m *Memory) DeleteEndpoint(_ context.Context, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.endpoints[id]
	if !ok || cur.Tenant != tenant {
		return webhook.ErrNotFound
	}
	delete(m.endpoints, id)
	return nil
}

// Claim implements webhook.Store.
func (m *Memory) Claim(_ context.Context, endpoint, stream, holder string, now, until time.Time) (webhook.Cursor, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := endpoint + "#" + stream
	c, ok := m.cursors[k]
	if !ok {
		c = webhook.Cursor{Endpoint: endpoint, Stream: stream}
	}
	if c.Holder != "" && c.Holder != holder && c.LeaseUntil.After(now) {
		return webhook.Cursor{}, false, nil
	}
	c.Holder, c.LeaseUntil = holder, until
	m.cursors[k] = c
	return c, true, nil
}

// Release implements webhook.Store.
func (m *Memory) Release(_ context.Context, c webhook.Cursor) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := c.Endpoint + "#" + c.Stream
	if cur, ok := m.cursors[k]; !ok || cur.Holder != c.Holder {
		return false, nil
	}
	c.Holder, c.LeaseUntil = "", time.Time{}
	m.cursors[k] = c
	return true, nil
}

// LogDelivery implements webhook.Store.
func (m *Memory) LogDelivery(_ context.Context, d webhook.Delivery) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log[d.Endpoint] == nil {
		m.log[d.Endpoint] = map[string]webhook.Delivery{}
	}
	m.log[d.Endpoint][d.Key] = d
	return nil
}

// Deliveries implements webhook.Store.
func (m *Memory) Deliveries(_ context.Context, endpoint string, limit int, after string) ([]webhook.Delivery, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.log[endpoint] {
		if after == "" || k < after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	next := ""
	if len(keys) > limit {
		keys, next = keys[:limit], keys[limit-1]
	}
	out := make([]webhook.Delivery, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.log[endpoint][k])
	}
	return out, next, nil
}

// Run checks the webhook.Store contract on the stores newStore makes.
func Run(t *testing.T, newStore func(t *testing.T) webhook.Store) {
	t.Run("endpoints", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		tenant := "tenant-" + webhook.NewID()
		at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
		var ids []string
		for i := range 3 {
			ep := webhook.Endpoint{ID: webhook.NewID(), Tenant: tenant, URL: fmt.Sprintf("https://example.com/%d", i),
				Events: []string{webhook.All}, Secret: webhook.NewSecret(), CreatedAt: at.Add(time.Duration(i) * time.Second), UpdatedAt: at}
			if err := st.CreateEndpoint(ctx, ep, 3); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, ep.ID)
		}
		extra := webhook.Endpoint{ID: webhook.NewID(), Tenant: tenant, URL: "https://example.com/x", Events: []string{webhook.All}, Secret: webhook.NewSecret(), CreatedAt: at}
		if err := st.CreateEndpoint(ctx, extra, 3); !errors.Is(err, webhook.ErrLimit) {
			t.Errorf("a 4th endpoint with room for 3: %v, want ErrLimit", err)
		}
		other := extra
		other.ID, other.Tenant = webhook.NewID(), "other-"+tenant
		if err := st.CreateEndpoint(ctx, other, 3); err != nil {
			t.Errorf("another tenant's first endpoint: %v", err)
		}
		eps, err := st.Endpoints(ctx, tenant)
		if err != nil || len(eps) != 3 || eps[0].ID != ids[0] || eps[2].ID != ids[2] {
			t.Fatalf("Endpoints = %+v, %v; want %v in order", eps, err, ids)
		}
		if _, err := st.Endpoint(ctx, tenant, other.ID); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("another tenant's endpoint read: %v, want ErrNotFound", err)
		}
		ep := eps[1]
		ep.Disabled, ep.DisabledReason, ep.PreviousSecret, ep.PreviousExpiresAt = true, "gone", "whsec_old", at.Add(time.Hour)
		if err := st.PutEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
		if got, err := st.Endpoint(ctx, tenant, ep.ID); err != nil || !got.Disabled || got.PreviousSecret != "whsec_old" || !got.PreviousExpiresAt.Equal(ep.PreviousExpiresAt) || got.Secret != ep.Secret {
			t.Errorf("after PutEndpoint: %+v, %v", got, err)
		}
		stranger := ep
		stranger.Tenant = "other-" + tenant
		if err := st.PutEndpoint(ctx, stranger); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("PutEndpoint under another tenant: %v, want ErrNotFound", err)
		}
		if err := st.DeleteEndpoint(ctx, "other-"+tenant, ep.ID); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("DeleteEndpoint under another tenant: %v, want ErrNotFound", err)
		}
		if err := st.DeleteEndpoint(ctx, tenant, ep.ID); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateEndpoint(ctx, extra, 3); err != nil {
			t.Errorf("a create after a delete made room: %v", err)
		}
	})
	t.Run("cursors", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		ep, stream := webhook.NewID(), "agent-"+webhook.NewID()
		now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
		c, ok, err := st.Claim(ctx, ep, stream, "a", now, now.Add(time.Minute))
		if err != nil || !ok || c.After != 0 {
			t.Fatalf("first claim: %+v %v %v", c, ok, err)
		}
		if _, ok, err := st.Claim(ctx, ep, stream, "b", now.Add(time.Second), now.Add(time.Minute)); err != nil || ok {
			t.Errorf("a claim of a held cursor: %v %v, want refused", ok, err)
		}
		c.After, c.Attempts, c.NextAt = 7, 2, now.Add(time.Hour)
		if ok, err := st.Release(ctx, c); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
		got, ok, err := st.Claim(ctx, ep, stream, "b", now.Add(time.Second), now.Add(time.Minute))
		if err != nil || !ok || got.After != 7 || got.Attempts != 2 || !got.NextAt.Equal(c.NextAt) {
			t.Fatalf("claim after release: %+v %v %v", got, ok, err)
		}
		if ok, err := st.Release(ctx, c); err != nil || ok {
			t.Errorf("a release by a holder no more: %v %v, want refused", ok, err)
		}
		if got, ok, err := st.Claim(ctx, ep, stream, "c", now.Add(2*time.Minute), now.Add(3*time.Minute)); err != nil || !ok || got.After != 7 {
			t.Errorf("a claim past the lease: %+v %v %v", got, ok, err)
		}
	})
	t.Run("delivery log", func(t *testing.T) {
		t.Parallel()
		st := newStore(t)
		ctx := t.Context()
		ep := webhook.NewID()
		at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
		for i := range 5 {
			d := webhook.Delivery{Endpoint: ep, Key: fmt.Sprintf("%013d#msg_%d", at.Add(time.Duration(i)*time.Second).UnixMilli(), i),
				MessageID: fmt.Sprintf("msg_%d", i), Type: webhook.AgentMessage, Sequence: int64(i), Status: webhook.StatusRetrying, Attempts: 1, CreatedAt: at, UpdatedAt: at}
			if err := st.LogDelivery(ctx, d); err != nil {
				t.Fatal(err)
			}
			d.Status, d.Attempts = webhook.StatusDelivered, 2
			if err := st.LogDelivery(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		page, next, err := st.Deliveries(ctx, ep, 3, "")
		if err != nil || len(page) != 3 || next == "" || page[0].MessageID != "msg_4" || page[0].Status != webhook.StatusDelivered || page[0].Attempts != 2 {
			t.Fatalf("first page %+v %q %v", page, next, err)
		}
		rest, next, err := st.Deliveries(ctx, ep, 3, next)
		if err != nil || len(rest) != 2 || next != "" || rest[1].MessageID != "msg_0" {
			t.Fatalf("second page %+v %q %v", rest, next, err)
		}
	})
}
