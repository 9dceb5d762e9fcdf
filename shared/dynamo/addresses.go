package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/access"
	"github.com/remote-agents/remote-agents/shared/launch"
)

// Addresses records where running sandboxes are (launch.Address), in the
// idempotency table, both ways: one item per address, sandbox_addr#<ip>
// (who is at an address: the egress proxy's question), and one per
// sandbox, sandbox_addr_of#<sandbox> (where a sandbox is: the sandbox
// proxy's). Both are written when a task runs and removed when it stops
// (each if it is still that task's), with a TTL should the stop never come.
type Addresses struct {
	table *Table
}

// NewAddresses returns the records in idempotencyTable.
func NewAddresses(api API, idempotencyTable string) *Addresses {
	return &Addresses{table: NewTable(api, idempotencyTable)}
}

// addressItem is an address's record (sandbox_addr#<ip>).
type addressItem struct {
	Key       string `json:"key"`
	Sandbox   string `json:"sandbox"`
	Ref       string `json:"sandbox_ref"`
	ExpiresAt int64  `json:"expires_at"`
}

// sandboxAddressItem is a sandbox's record (sandbox_addr_of#<sandbox>).
type sandboxAddressItem struct {
	Key       string `json:"key"`
	Addr      string `json:"addr"`
	Ref       string `json:"sandbox_ref"`
	ExpiresAt int64  `json:"expires_at"`
}

func addressKey(a netip.Addr) map[string]string {
	return map[string]string{"key": "sandbox_addr#" + a.Unmap().String()}
}

func sandboxAddressKey(sandbox string) map[string]string {
	return map[string]string{"key": access.AddressOfItems + sandbox}
}

// Record says a's sandbox runs at a.Addr, until expires at the latest: at
// the address, and of the sandbox (replacing where an earlier task of it
// ran).
func (s *Addresses) Record(ctx context.Context, a launch.Address, expires time.Time) error {
	addr := a.Addr.Unmap()
	err := s.table.Put(ctx, addressItem{Key: addressKey(addr)["key"], Sandbox: a.Sandbox, Ref: a.Ref, ExpiresAt: expires.Unix()})
	if err == nil && a.Sandbox != "" {
		err = s.table.Put(ctx, sandboxAddressItem{Key: sandboxAddressKey(a.Sandbox)["key"], Addr: addr.String(), Ref: a.Ref, ExpiresAt: expires.Unix()})
	}
	if err != nil {
		return fmt.Errorf("record the address of %s: %w", a.Sandbox, err)
	}
	return nil
}

// Forget removes a's records, the address's and the sandbox's, each if it
// is still a.Ref's (another task may run at the address since, or of the
// sandbox).
func (s *Addresses) Forget(ctx context.Context, a launch.Address) error {
	sameTask := expression.Name("sandbox_ref").Equal(expression.Value(a.Ref))
	if a.Addr.IsValid() {
		err := s.table.Delete(ctx, addressKey(a.Addr), sameTask)
		if err != nil && !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("forget the address %s: %w", a.Addr, err)
		}
	}
	if a.Sandbox != "" {
		err := s.table.Delete(ctx, sandboxAddressKey(a.Sandbox), sameTask)
		if err != nil && !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("forget the address of %s: %w", a.Sandbox, err)
		}
	}
	return nil
}

// At returns the sandbox recorded at addr; launch.ErrNoAddress if none.
func (s *Addresses) At(ctx context.Context, addr netip.Addr) (launch.Address, error) {
	var it addressItem
	err := s.table.Get(ctx, addressKey(addr), &it)
	if errors.Is(err, ErrNotFound) {
		return launch.Address{}, launch.ErrNoAddress
	}
	if err != nil {
		return launch.Address{}, fmt.Errorf("the sandbox at %s: %w", addr, err)
	}
	return launch.Address{Addr: addr.Unmap(), Sandbox: it.Sandbox, Ref: it.Ref}, nil
}

// Of returns where sandbox (a session's id, or a warm pool sandbox's) was
// last recorded running; launch.ErrNoAddress if nowhere. The caller checks
// the record's Ref is the sandbox's current task: a record outlives its
// task until that task's stop is heard of.
func (s *Addresses) Of(ctx context.Context, sandbox string) (launch.Address, error) {
	var it sandboxAddressItem
	err := s.table.Get(ctx, sandboxAddressKey(sandbox), &it)
	if errors.Is(err, ErrNotFound) {
		return launch.Address{}, launch.ErrNoAddress
	}
	if err != nil {
		return launch.Address{}, fmt.Errorf("the address of %s: %w", sandbox, err)
	}
	addr, err := netip.ParseAddr(it.Addr)
	if err != nil {
		return launch.Address{}, fmt.Errorf("the address of %s: %q: %w", sandbox, it.Addr, err)
	}
	return launch.Address{Addr: addr, Sandbox: sandbox, Ref: it.Ref}, nil
}
