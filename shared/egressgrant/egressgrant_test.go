package egressgrant_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/egressgrant"
	"github.com/remote-agents/remote-agents/shared/egressproxy"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

type addresses map[netip.Addr]launch.Address

func (a addresses) At(_ context.Context, addr netip.Addr) (launch.Address, error) {
	if r, ok := a[addr]; ok {
		return r, nil
	}
	return launch.Address{}, launch.ErrNoAddress
}

const sid = "5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6e"

// A connection is its session's if the session still holds the task
// recorded at its address; its grant is the session's policy now.
func TestIdentifyAndLookup(t *testing.T) {
	st := storetest.NewMemory()
	now := time.Now().UTC()
	policy := egress.Policy{Mode: egress.ModeAllowlist, Allow: []string{"api.example.com"}}
	if err := st.Create(t.Context(), session.Session{ID: sid, State: session.Working, Generation: 1, Egress: &policy, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.0.1.23")
	book := addresses{ip: {Addr: ip, Sandbox: sid, Ref: "task/1"}}
	svc := egressgrant.New(egressgrant.Options{Sessions: st, Addresses: book})
	from := netip.AddrPortFrom(ip, 40000)
	// The task runs before its launch is recorded: not known yet.
	if _, err := svc.Identify(t.Context(), from); !errors.Is(err, egressproxy.ErrUnknown) {
		t.Fatalf("before the ref is stored: %v", err)
	}
	if _, err := st.Touch(t.Context(), sid, 1, session.Fields{SandboxRef: "task/1"}); err != nil {
		t.Fatal(err)
	}
	if id, err := svc.Identify(t.Context(), from); err != nil || id != sid {
		t.Fatalf("Identify = %q, %v", id, err)
	}
	if _, err := svc.Identify(t.Context(), netip.MustParseAddrPort("10.0.1.24:1")); !errors.Is(err, egressproxy.ErrUnknown) {
		t.Errorf("an address of no sandbox: %v", err)
	}
	g, err := svc.Lookup(t.Context(), sid)
	if err != nil || g.Policy.Mode != egress.ModeAllowlist || len(g.Policy.Allow) != 1 {
		t.Fatalf("Lookup = %+v, %v", g, err)
	}
	// A relaunch (another task) makes the old record another task's.
	if _, err := st.Touch(t.Context(), sid, 1, session.Fields{SandboxRef: "task/2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Identify(t.Context(), from); !errors.Is(err, egressproxy.ErrUnknown) {
		t.Errorf("an older task's address: %v", err)
	}
	if _, err := st.Transition(t.Context(), sid, session.Change{From: session.Live, To: session.Ended, Reason: session.ReasonShutdown}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Lookup(t.Context(), sid); !errors.Is(err, egressproxy.ErrUnknown) {
		t.Errorf("an ended session's grant: %v", err)
	}
}
