package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/session"
)

// RunBudgets checks the session.Budgets contract: holds against the caps,
// exact under concurrency, and their settlement.
func RunBudgets(t *testing.T, newStore func(t *testing.T) BudgetStore) {
	live := func(t *testing.T, st BudgetStore, tenant string) session.Session {
		s := sample(t, session.Working, 1)
		s.Tenant = tenant
		return create(t, st, s)
	}
	refusedBy := func(t *testing.T, err error, scope string, exhausted bool) {
		t.Helper()
		var be *session.BudgetError
		if !errors.As(err, &be) || !errors.Is(err, session.ErrOverBudget) || be.Scope != scope || be.Exhausted != exhausted {
			t.Fatalf("hold: %v, want the %s scope's refusal (exhausted %v)", err, scope, exhausted)
		}
	}
	t.Run("settled calls count on the session and the tenant's day and month", func(t *testing.T) {
		st := newStore(t)
		tenant := "t-" + newID(t)[:8]
		s := live(t, st, tenant)
		at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		h := session.Hold{SessionID: s.ID, Tenant: tenant, At: at, MicroUSD: 500}
		if err := st.Hold(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		if err := st.Settle(t.Context(), h, session.Usage{InputTokens: 10, OutputTokens: 5, Calls: 1, CostMicroUSD: 300}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(t.Context(), s.ID)
		if err != nil || got.CostMicroUSD != 300 || got.InputTokens != 10 || got.OutputTokens != 5 || got.ModelCalls != 1 {
			t.Errorf("session usage %+v (%v), want the call's", got.Usage(), err)
		}
		for _, scope := range []string{session.ScopeTenantDay, session.ScopeTenantMonth} {
			if sp, err := st.TenantSpend(t.Context(), tenant, scope, at); err != nil || sp != (session.Spent{MicroUSD: 300}) {
				t.Errorf("%s: %+v (%v), want 300 spent, nothing held", scope, sp, err)
			}
		}
		if sp, err := st.TenantSpend(t.Context(), tenant, session.ScopeTenantDay, at.Add(24*time.Hour)); err != nil || sp.MicroUSD != 0 {
			t.Errorf("the next day: %+v (%v), want nothing", sp, err)
		}
		if err := st.Hold(t.Context(), session.Hold{SessionID: newID(t), SessionCap: 10, MicroUSD: 1}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("hold for no session: %v, want ErrNotFound", err)
		}
		if err := st.Settle(t.Context(), session.Hold{SessionID: newID(t)}, session.Usage{Calls: 1}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("settle for no session: %v, want ErrNotFound", err)
		}
	})
	t.Run("a cap holds the rest for calls under way and refuses once reached", func(t *testing.T) {
		st := newStore(t)
		s := live(t, st, "")
		h := session.Hold{SessionID: s.ID, MicroUSD: 60, SessionCap: 100}
		if err := st.Hold(t.Context(), h); err != nil {
			t.Fatal(err)
		}
		refusedBy(t, st.Hold(t.Context(), h), session.ScopeSession, false)
		if err := st.Settle(t.Context(), h, session.Usage{Calls: 1, CostMicroUSD: 30}); err != nil {
			t.Fatal(err)
		}
		if err := st.Hold(t.Context(), h); err != nil {
			t.Fatalf("30 spent, 60 to hold under 100: %v", err)
		}
		if err := st.Settle(t.Context(), h, session.Usage{Calls: 1, CostMicroUSD: 80}); err != nil {
			t.Fatal(err)
		}
		refusedBy(t, st.Hold(t.Context(), h), session.ScopeSession, true)
	})
	t.Run("the last call under a cap may hold more than is left, alone", func(t *testing.T) {
		st := newStore(t)
		tenant := "t-" + newID(t)[:8]
		a, b := live(t, st, tenant), live(t, st, tenant)
		at := time.Now()
		ha := session.Hold{SessionID: a.ID, Tenant: tenant, At: at, MicroUSD: 150, DayCap: 100, MonthCap: 1000}
		hb := ha
		hb.SessionID = b.ID
		if err := st.Hold(t.Context(), ha); err != nil {
			t.Fatal(err)
		}
		refusedBy(t, st.Hold(t.Context(), hb), session.ScopeTenantDay, false)
		if err := st.Settle(t.Context(), ha, session.Usage{Calls: 1, CostMicroUSD: 120}); err != nil {
			t.Fatal(err)
		}
		refusedBy(t, st.Hold(t.Context(), hb), session.ScopeTenantDay, true)
		if sp, err := st.TenantSpend(t.Context(), tenant, session.ScopeTenantMonth, at); err != nil || sp != (session.Spent{MicroUSD: 120}) {
			t.Errorf("month: %+v (%v), want 120 spent and nothing held", sp, err)
		}
	})
	t.Run("holds at once pass a cap exactly", func(t *testing.T) {
		st := newStore(t)
		tenant := "t-" + newID(t)[:8]
		at := time.Now()
		var mu sync.Mutex
		admitted, refused := 0, 0
		var wg sync.WaitGroup
		for range 10 {
			s := live(t, st, tenant)
			wg.Go(func() {
				err := st.Hold(t.Context(), session.Hold{SessionID: s.ID, Tenant: tenant, At: at, MicroUSD: 300, DayCap: 1000})
				mu.Lock()
				defer mu.Unlock()
				var be *session.BudgetError
				switch {
				case err == nil:
					admitted++
				case errors.As(err, &be) && !be.Exhausted:
					refused++
				default:
					t.Errorf("hold: %v", err)
				}
			})
		}
		wg.Wait()
		if admitted != 3 || refused != 7 {
			t.Errorf("%d held, %d refused; want 3 (900 of 1000) and 7", admitted, refused)
		}
		if sp, err := st.TenantSpend(t.Context(), tenant, session.ScopeTenantDay, at); err != nil || sp.HeldMicroUSD != 900 {
			t.Errorf("day: %+v (%v), want 900 held", sp, err)
		}
	})
}
