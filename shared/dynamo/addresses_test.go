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
	if err := st.Forget(t.Context(), ip, first.Ref); err != nil {
		t.Fatal(err)
	}
	if got, err := st.At(t.Context(), ip); err != nil || got != second {
		t.Errorf("after the first task's stop: %+v, %v", got, err)
	}
	if err := st.Forget(t.Context(), ip, second.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := st.At(t.Context(), ip); !errors.Is(err, launch.ErrNoAddress) {
		t.Errorf("after its stop: %v", err)
	}
}
