package dynamo_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/launch"
)

// An address is its running sandbox's until another task is recorded at
// it; the stop of the first then leaves the second's record.
func TestAddresses(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	st := dynamo.NewAddresses(api, set.Idempotency.Name)
	ip := netip.MustParseAddr("10.0.1.23")
	if _, err := st.At(t.Context(), ip); !errors.Is(err, launch.ErrNoAddress) {
		t.Fatalf("At before any record: %v", err)
	}
	first := launch.Address{Addr: ip, Sandbox: "s1", Ref: "arn:task/1"}
	if err := st.Record(t.Context(), first, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := st.At(t.Context(), ip); err != nil || got != first {
		t.Fatalf("At = %+v, %v", got, err)
	}
	second := launch.Address{Addr: ip, Sandbox: "s2", Ref: "arn:task/2"}
	if err := st.Record(t.Context(), second, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if got, err := st.At(t.Context(), ip); err != nil || got != second {
		t.Errorf("after the first task's stop: %+v, %v", got, err)
	}
	if err := st.Forget(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	if _, err := st.At(t.Context(), ip); !errors.Is(err, launch.ErrNoAddress) {
		t.Errorf("after its stop: %v", err)
	}
}

// A sandbox is found where its current task runs: a later task of it (a
// resumed session's) replaces the record, which the earlier task's stop
// then leaves; its own stop removes it.
func TestAddressOfASandbox(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	st := dynamo.NewAddresses(api, set.Idempotency.Name)
	if _, err := st.Of(t.Context(), "s1"); !errors.Is(err, launch.ErrNoAddress) {
		t.Fatalf("Of before any record: %v", err)
	}
	first := launch.Address{Addr: netip.MustParseAddr("10.0.1.23"), Sandbox: "s1", Ref: "arn:task/1"}
	if err := st.Record(t.Context(), first, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Of(t.Context(), "s1"); err != nil || got != first {
		t.Fatalf("Of = %+v, %v; want %+v", got, err, first)
	}
	// An IPv4-mapped address is recorded as the IPv4 address it is.
	second := launch.Address{Addr: netip.MustParseAddr("::ffff:10.0.2.7"), Sandbox: "s1", Ref: "arn:task/2"}
	if err := st.Record(t.Context(), second, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.Forget(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	want := launch.Address{Addr: netip.MustParseAddr("10.0.2.7"), Sandbox: "s1", Ref: "arn:task/2"}
	if got, err := st.Of(t.Context(), "s1"); err != nil || got != want {
		t.Errorf("after the first task's stop: %+v, %v; want %+v", got, err, want)
	}
	if _, err := st.At(t.Context(), first.Addr); !errors.Is(err, launch.ErrNoAddress) {
		t.Errorf("the first task's address after its stop: %v", err)
	}
	if _, err := st.Of(t.Context(), "s2"); !errors.Is(err, launch.ErrNoAddress) {
		t.Errorf("another sandbox: %v", err)
	}
	if err := st.Forget(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Of(t.Context(), "s1"); !errors.Is(err, launch.ErrNoAddress) {
		t.Errorf("after its stop: %v", err)
	}
	// Forgetting what is not recorded is no error.
	if err := st.Forget(t.Context(), second); err != nil {
		t.Errorf("forget again: %v", err)
	}
}
