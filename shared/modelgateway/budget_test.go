package modelgateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

// TestAdmitHoldsCallsWithinTheCaps: a call is held at the most it can cost
// (its bytes and max_tokens by the price table); a call past a job's token
// limit or a spent session budget is refused with budget_exceeded, and its
// session is told once and ends with the cap's reason; a call that finds the
// rest held waits until the call under way settles.
func TestAdmitHoldsCallsWithinTheCaps(t *testing.T) {
	t.Parallel()
	prices := modelgateway.Prices{"claude-sonnet-4": {Input: 3, Output: 15}}
	call := modelgateway.Call{Model: "claude-sonnet-4-5", Body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":1000}`)}
	most := int64(len(call.Body))*3 + 1000*15
	newGateway := func(t *testing.T, s session.Session, caps modelgateway.Caps) (*modelgateway.Gateway, *storetest.Memory) {
		st := storetest.NewMemory()
		s.State, s.Generation, s.CreatedAt = session.Working, 1, time.Now()
		if err := st.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
		return modelgateway.New(modelgateway.Options{Store: st, Prices: prices, Caps: caps}), st
	}
	refused := func(t *testing.T, st *storetest.Memory, id string, err error, reason session.Reason) {
		t.Helper()
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != apierror.BudgetExceeded {
			t.Fatalf("admit: %v, want budget_exceeded", err)
		}
		got, _ := st.Get(t.Context(), id)
		evs, _ := st.Events(t.Context(), id, 0, 10)
		if got.State != session.Ending || got.Reason != reason || len(evs) != 1 || evs[0].Type != sandboxwire.TypeBudgetExceeded {
			t.Errorf("after the refusal: %s %s, events %v; want ending %s, told once", got.State, got.Reason, evs, reason)
		}
	}

	t.Run("a job's token limit", func(t *testing.T) {
		gw, st := newGateway(t, session.Session{ID: "job-s", Blueprint: session.Blueprint{JobID: "j1", JobTokenLimit: 100}, Meter: session.Meter{InputTokens: 60, OutputTokens: 40}}, modelgateway.Caps{})
		sess, _ := st.Get(t.Context(), "job-s")
		_, err := gw.Admit(t.Context(), sess, call)
		refused(t, st, "job-s", err, session.ReasonTokenBudget)
	})
	t.Run("a spent session budget", func(t *testing.T) {
		gw, st := newGateway(t, session.Session{ID: "s1", Meter: session.Meter{CostMicroUSD: 20_000}}, modelgateway.Caps{Limits: registry.SessionLimits{MaxCostUSD: 0.02}})
		sess, _ := st.Get(t.Context(), "s1")
		_, err := gw.Admit(t.Context(), sess, call)
		refused(t, st, "s1", err, session.ReasonCostBudget)
		// Told once: a second refusal of the ending session adds nothing.
		sess, _ = st.Get(t.Context(), "s1")
		if _, err := gw.Admit(t.Context(), sess, call); err == nil {
			t.Fatal("a second call was admitted")
		}
		if evs, _ := st.Events(t.Context(), "s1", 0, 10); len(evs) != 1 {
			t.Errorf("%d events after two refusals, want 1", len(evs))
		}
	})
	t.Run("a caller that gives up", func(t *testing.T) {
		// The sandbox's call ends before the refusal is written: the
		// session still ends and is still told.
		st := storetest.NewMemory()
		s := session.Session{ID: "s3", State: session.Working, Generation: 1, CreatedAt: time.Now(), Meter: session.Meter{CostMicroUSD: 20_000}}
		if err := st.Create(t.Context(), s, nil); err != nil {
			t.Fatal(err)
		}
		gw := modelgateway.New(modelgateway.Options{Store: ctxStore{st}, Prices: prices, Caps: modelgateway.Caps{Limits: registry.SessionLimits{MaxCostUSD: 0.02}}})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := gw.Admit(ctx, s, call)
		refused(t, st, "s3", err, session.ReasonCostBudget)
	})
	t.Run("the rest held by a call under way", func(t *testing.T) {
		gw, st := newGateway(t, session.Session{ID: "s2", Tenant: "t1", Blueprint: session.Blueprint{AppCaps: &registry.SpendCaps{PerDayUSD: 1}}}, modelgateway.Caps{DayUSD: 5})
		sess, _ := st.Get(t.Context(), "s2")
		first, err := gw.Admit(t.Context(), sess, call)
		if err != nil || first.MicroUSD != most || first.DayCap != 1_000_000 {
			t.Fatalf("first hold %+v (%v), want %d micro-USD under the app key's 1 USD", first, err, most)
		}
		// 1 USD admits ~63 holds of 15,141 micro-USD; take the rest.
		var held []session.Hold
		for {
			h, err := gw.Admit(t.Context(), sess, modelgateway.Call{Model: call.Model, Body: call.Body})
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, h)
			if sp, _ := st.TenantSpend(t.Context(), "t1", session.ScopeTenantDay, time.Now()); sp.HeldMicroUSD+most > 1_000_000 {
				break
			}
		}
		// The next call waits while the rest is held (here until its
		// caller gives up), and goes once the calls under way settle.
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err = gw.Admit(ctx, sess, call)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call past the rest held: %v, want it waiting", err)
		}
		for _, h := range append(held, first) {
			if err := gw.Record(t.Context(), sess, call, h, session.Usage{InputTokens: 10, OutputTokens: 10, Calls: 1}, true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := gw.Admit(t.Context(), sess, call); err != nil {
			t.Errorf("the next call once the others settled: %v", err)
		}
	})
}

// ctxStore is the memory store failing a write whose context is done, as
// DynamoDB's client does.
type ctxStore struct{ *storetest.Memory }

func (s ctxStore) Transition(ctx context.Context, id string, c session.Change) (session.Session, error) {
	if err := ctx.Err(); err != nil {
		return session.Session{}, err
	}
	return s.Memory.Transition(ctx, id, c)
}

func (s ctxStore) AppendEvents(ctx context.Context, id string, generation int, evs []session.Event) ([]session.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Memory.AppendEvents(ctx, id, generation, evs)
}
