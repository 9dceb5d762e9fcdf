package systemtest_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/session"
)

// BenchmarkAdmission measures what the quotas and spend caps add where they
// are checked, on the dev stack's DynamoDB, iteration by iteration in
// alternating order. Create: a session written alone (a plain conditional
// put, as before the live counter) against one admitted within the live and
// the minute quotas (one transaction with both counters). Model call: its
// usage and its app's spend of the day and month settled without caps (one
// transaction) against a call also held on the session's, the day's and
// the month's caps before it starts (a second transaction). It reports each
// and the added p50 and p95.
func BenchmarkAdmission(b *testing.B) {
	s := start(b)
	store := s.srv.Env.SessionStore()
	tenant := "bench-" + uuid.NewString()[:8]
	newSession := func(tenant string) session.Session {
		now := time.Now().UTC()
		return session.Session{ID: uuid.NewString(), Tenant: tenant, State: session.Provisioning, Generation: 1,
			Blueprint: session.Blueprint{TmuxSessionName: "ra-bench"}, CreatedAt: now, UpdatedAt: now}
	}
	called := newSession(tenant)
	if err := store.Create(b.Context(), called, nil); err != nil {
		b.Fatal(err)
	}
	usage := session.Usage{InputTokens: 1000, OutputTokens: 200, Calls: 1, CostMicroUSD: 6000}
	limits := session.Admission{LiveLimit: 1 << 30, MinuteLimit: 1 << 30}
	rec := benchrec.New(b)
	i := 0
	for b.Loop() {
		var create, call [2]time.Duration
		for _, k := range []int{i % 2, 1 - i%2} {
			began := time.Now()
			var err error
			if k == 0 {
				err = store.Create(b.Context(), newSession(""), nil)
			} else {
				limits.Minute = time.Now().Truncate(time.Minute)
				err = store.Admit(b.Context(), newSession(tenant), nil, limits)
			}
			if err != nil {
				b.Fatal(err)
			}
			create[k] = time.Since(began)
		}
		for _, k := range []int{i % 2, 1 - i%2} {
			h := session.Hold{SessionID: called.ID, Tenant: tenant, At: time.Now(), MicroUSD: 70000}
			began := time.Now()
			if k == 1 {
				h.SessionCap, h.DayCap, h.MonthCap = 1<<50, 1<<50, 1<<50
				if err := store.Hold(b.Context(), h); err != nil {
					b.Fatal(err)
				}
			}
			if err := store.Settle(b.Context(), h, usage); err != nil {
				b.Fatal(err)
			}
			call[k] = time.Since(began)
		}
		i++
		rec.Add("create-plain", create[0])
		rec.Add("create-admitted", create[1])
		rec.Add("create-added", create[1]-create[0])
		rec.Add("call-plain", call[0])
		rec.Add("call-held", call[1])
		rec.Add("call-added", call[1]-call[0])
	}
	rec.Done()
}
