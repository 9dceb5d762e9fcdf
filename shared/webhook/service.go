package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Agents reads an app's agents (session.Reader and session.Fleet).
type Agents interface {
	Get(ctx context.Context, id string) (session.Session, error)
	ListByTenant(ctx context.Context, tenant string, f session.ListFilter, limit int, after string) ([]session.Session, string, error)
}

// Service serves the app's webhook routes: endpoints, their log, replays.
type Service struct {
	Store     Store
	Addresses Addresses
	// Queue takes replays' triggers.
	Queue  queue.Queue
	Agents Agents
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Request is a create's or a change's body: a create needs url and events;
// a change sets what it names.
type Request struct {
	URL         *string  `json:"url"`
	Events      []string `json:"events"`
	Description *string  `json:"description"`
	// Disabled turns an endpoint off or (false) on again.
	Disabled *bool `json:"disabled"`
}

// View is an endpoint as the app sees it: its secret only in the answer
// of its create and of a rotation.
type View struct {
	ID                      string     `json:"id"`
	URL                     string     `json:"url"`
	Description             string     `json:"description,omitempty"`
	Events                  []string   `json:"events"`
	Disabled                bool       `json:"disabled"`
	DisabledReason          string     `json:"disabled_reason,omitempty"`
	Secret                  string     `json:"secret,omitempty"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
}

func view(ep Endpoint, now time.Time) View {
	v := View{ID: ep.ID, URL: ep.URL, Description: ep.Description, Events: ep.Events, Disabled: ep.Disabled,
		DisabledReason: ep.DisabledReason, CreatedAt: ep.CreatedAt, UpdatedAt: ep.UpdatedAt}
	if ep.PreviousSecret != "" && now.Before(ep.PreviousExpiresAt) {
		at := ep.PreviousExpiresAt
		v.PreviousSecretExpiresAt = &at
	}
	return v
}

// List is the answer of GET /api/v1/webhooks.
type List struct {
	Webhooks []View `json:"webhooks"`
}

// Create registers an endpoint of app's; the answer holds its secret, once.
func (s *Service) Create(ctx context.Context, app registry.AppKey, in Request) (View, error) {
	if in.URL == nil || in.Events == nil {
		return View{}, apierror.New(apierror.InvalidRequest, "url and events are required.")
	}
	if in.Disabled != nil {
		return View{}, apierror.New(apierror.InvalidRequest, "disabled is not set at create.")
	}
	now := s.now()
	ep := Endpoint{ID: NewID(), Tenant: app.Tenant, Secret: NewSecret(), CreatedAt: now, UpdatedAt: now}
	if err := s.apply(ctx, &ep, in); err != nil {
		return View{}, err
	}
	err := s.Store.CreateEndpoint(ctx, ep, MaxEndpoints)
	if errors.Is(err, ErrLimit) {
		q := apierror.New(apierror.QuotaExceeded, "An app holds at most %d webhook endpoints.", MaxEndpoints)
		q.Details = map[string]any{"quota": "webhooks", "limit": MaxEndpoints}
		return View{}, q
	}
	if err != nil {
		return View{}, err
	}
	v := view(ep, now)
	v.Secret = ep.Secret
	return v, nil
}

// apply checks in and sets what it names on ep.
func (s *Service) apply(ctx context.Context, ep *Endpoint, in Request) error {
	if in.URL != nil {
		if err := s.Addresses.CheckURL(ctx, *in.URL); err != nil {
			return apierror.New(apierror.InvalidRequest, "url: %s.", err.Error())
		}
		ep.URL = *in.URL
	}
	if in.Events != nil {
		events, err := checkEvents(in.Events)
		if err != nil {
			return err
		}
		ep.Events = events
	}
	if in.Description != nil {
		if len(*in.Description) > MaxDescriptionBytes || strings.ContainsFunc(*in.Description, isControl) {
			return apierror.New(apierror.InvalidRequest, "description is at most %d bytes of text.", MaxDescriptionBytes)
		}
		ep.Description = *in.Description
	}
	if in.Disabled != nil {
		ep.Disabled = *in.Disabled
		ep.DisabledReason = ""
		if ep.Disabled {
			ep.DisabledReason = "disabled by the app"
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f }

// checkEvents checks an endpoint's event types: known ones or "*", each
// once.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, apierror.New(apierror.InvalidRequest, "events names at least one event type, or \"*\" for all.")
	}
	out := make([]string, 0, len(events))
	for i, e := range events {
		if e != All && !slices.Contains(Types, e) {
			err := apierror.New(apierror.InvalidRequest, "events[%d] is not an event type: use one of %s, or \"*\".", i, strings.Join(Types, ", "))
			err.Details = map[string]any{"valid_events": Types}
			return nil, err
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// List lists app's endpoints.
func (s *Service) List(ctx context.Context, app registry.AppKey) (List, error) {
	eps, err := s.Store.Endpoints(ctx, app.Tenant)
	if err != nil {
		return List{}, err
	}
	now := s.now()
	out := List{Webhooks: make([]View, 0, len(eps))}
	for _, ep := range eps {
		out.Webhooks = append(out.Webhooks, view(ep, now))
	}
	return out, nil
}

// Get reads one of app's endpoints.
func (s *Service) Get(ctx context.Context, app registry.AppKey, id string) (View, error) {
	ep, err := s.endpoint(ctx, app, id)
	if err != nil {
		return View{}, err
	}
	return view(ep, s.now()), nil
}

func (s *Service) endpoint(ctx context.Context, app registry.AppKey, id string) (Endpoint, error) {
	if !validID(id) {
		return Endpoint{}, notFound()
	}
	ep, err := s.Store.Endpoint(ctx, app.Tenant, id)
	if errors.Is(err, ErrNotFound) {
		return Endpoint{}, notFound()
	}
	return ep, err
}

func notFound() error {
	return apierror.New(apierror.WebhookNotFound, "The app has no webhook endpoint of that id.")
}

// validID reports whether id could be an endpoint's (NewID's form).
func validID(id string) bool {
	if len(id) != 29 || !strings.HasPrefix(id, "wh_") {
		return false
	}
	for _, r := range id[3:] {
		if (r < 'a' || r > 'z') && (r < '2' || r > '7') {
			return false
		}
	}
	return true
}

// Update changes what in names of one of app's endpoints.
func (s *Service) Update(ctx context.Context, app registry.AppKey, id string, in Request) (View, error) {
	ep, err := s.endpoint(ctx, app, id)
	if err != nil {
		return View{}, err
	}
	if err := s.apply(ctx, &ep, in); err != nil {
		return View{}, err
	}
	ep.UpdatedAt = s.now()
	if err := s.Store.PutEndpoint(ctx, ep); errors.Is(err, ErrNotFound) {
		return View{}, notFound()
	} else if err != nil {
		return View{}, err
	}
	return view(ep, ep.UpdatedAt), nil
}

// Delete deletes one of app's endpoints.
func (s *Service) Delete(ctx context.Context, app registry.AppKey, id string) error {
	if !validID(id) {
		return notFound()
	}
	err := s.Store.DeleteEndpoint(ctx, app.Tenant, id)
	if errors.Is(err, ErrNotFound) {
		return notFound()
	}
	return err
}

// Rotate gives an endpoint a new secret; the old one signs beside it for
// SecretOverlap. The answer holds the new secret, once.
func (s *Service) Rotate(ctx context.Context, app registry.AppKey, id string) (View, error) {
	ep, err := s.endpoint(ctx, app, id)
	if err != nil {
		return View{}, err
	}
	now := s.now()
	ep.PreviousSecret, ep.PreviousExpiresAt = ep.Secret, now.Add(SecretOverlap)
	ep.Secret, ep.UpdatedAt = NewSecret(), now
	if err := s.Store.PutEndpoint(ctx, ep); err != nil {
		return View{}, err
	}
	v := view(ep, now)
	v.Secret = ep.Secret
	return v, nil
}

// DeliveryList is the answer of GET /api/v1/webhooks/{id}/deliveries.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
	// Next, when set, is the ?after= of the next page.
	Next string `json:"next,omitempty"`
}

// MaxListLimit bounds a page of the delivery log.
const MaxListLimit = 100

// Deliveries lists one of app's endpoints' delivery log, newest first.
func (s *Service) Deliveries(ctx context.Context, app registry.AppKey, id string, limit int, after string) (DeliveryList, error) {
	if _, err := s.endpoint(ctx, app, id); err != nil {
		return DeliveryList{}, err
	}
	if limit <= 0 {
		limit = 50
	}
	if limit > MaxListLimit {
		return DeliveryList{}, apierror.New(apierror.InvalidRequest, "limit is at most %d.", MaxListLimit)
	}
	if len(after) > 256 {
		return DeliveryList{}, apierror.New(apierror.InvalidRequest, "after is not a cursor this list gave.")
	}
	ds, next, err := s.Store.Deliveries(ctx, id, limit, after)
	if err != nil {
		return DeliveryList{}, err
	}
	if ds == nil {
		ds = []Delivery{}
	}
	return DeliveryList{Deliveries: ds, Next: next}, nil
}

// ReplayRequest is a replay's body: from_sequence with agent_id, or since
// with or without agent_id.
type ReplayRequest struct {
	Since        *time.Time `json:"since"`
	FromSequence *int64     `json:"from_sequence"`
	AgentID      string     `json:"agent_id"`
}

// ReplayView is a replay's answer: how many agents' streams are re-sent.
type ReplayView struct {
	Agents    int  `json:"agents"`
	Truncated bool `json:"truncated,omitempty"`
}

// MaxReplayAgents bounds the agents one replay covers.
const MaxReplayAgents = 1000

// Replay re-sends what one of app's endpoints subscribes to of an agent's
// stream from a sequence number, or of its agents' streams since a time,
// with the original webhook-ids; the live deliveries go on unchanged.
func (s *Service) Replay(ctx context.Context, app registry.AppKey, id string, in ReplayRequest) (ReplayView, error) {
	ep, err := s.endpoint(ctx, app, id)
	if err != nil {
		return ReplayView{}, err
	}
	switch {
	case in.Since == nil && in.FromSequence == nil:
		return ReplayView{}, apierror.New(apierror.InvalidRequest, "A replay names since (a time) or from_sequence (with agent_id).")
	case in.Since != nil && in.FromSequence != nil:
		return ReplayView{}, apierror.New(apierror.InvalidRequest, "A replay names since or from_sequence, not both.")
	case in.FromSequence != nil && (in.AgentID == "" || *in.FromSequence < 1):
		return ReplayView{}, apierror.New(apierror.InvalidRequest, "from_sequence is 1 or more, with the agent_id whose stream it numbers.")
	case in.Since != nil && in.Since.After(s.now()):
		return ReplayView{}, apierror.New(apierror.InvalidRequest, "since is in the future.")
	}
	var agents []session.Session
	truncated := false
	if in.AgentID != "" {
		a, err := s.Agents.Get(ctx, in.AgentID)
		if errors.Is(err, session.ErrNotFound) || err == nil && a.Tenant != app.Tenant {
			return ReplayView{}, apierror.New(apierror.AgentNotFound, "The app has no agent of that id.")
		}
		if err != nil {
			return ReplayView{}, err
		}
		agents = []session.Session{a}
	} else if agents, truncated, err = s.activeSince(ctx, app.Tenant, *in.Since); err != nil {
		return ReplayView{}, err
	}
	from := int64(1)
	if in.FromSequence != nil {
		from = *in.FromSequence
	}
	if in.AgentID == "" {
		// The app's own stream too (quota.exceeded), to its end.
		agents = append(agents, session.Session{ID: session.AppStream(app.Tenant), LastSeq: math.MaxInt64})
	}
	for _, a := range agents {
		r := &Replay{Tenant: app.Tenant, Endpoint: ep.ID, From: from, Until: a.LastSeq}
		if in.Since != nil {
			r.Since = *in.Since
		}
		raw, err := json.Marshal(Trigger{Agent: a.ID, Replay: r})
		if err != nil {
			return ReplayView{}, err
		}
		if _, err := s.Queue.Send(ctx, string(raw), 0); err != nil {
			return ReplayView{}, fmt.Errorf("queue a replay: %w", err)
		}
	}
	n := len(agents)
	if in.AgentID == "" {
		n-- // the app's own stream is not an agent's
	}
	return ReplayView{Agents: n, Truncated: truncated}, nil
}

// activeSince lists tenant's recorded agents that had not ended by since,
// newest first, at most MaxReplayAgents.
func (s *Service) activeSince(ctx context.Context, tenant string, since time.Time) ([]session.Session, bool, error) {
	var out []session.Session
	after := ""
	for scanned := 0; ; {
		page, next, err := s.Agents.ListByTenant(ctx, tenant, session.ListFilter{}, 100, after)
		if err != nil {
			return nil, false, err
		}
		if scanned += len(page); scanned > 10*MaxReplayAgents {
			return out, true, nil
		}
		for _, a := range page {
			if !session.Recorded(a) || !a.EndedAt.IsZero() && a.EndedAt.Before(since) {
				continue
			}
			if len(out) == MaxReplayAgents {
				return out, true, nil
			}
			out = append(out, a)
		}
		if next == "" {
			return out, false, nil
		}
		after = next
	}
}
