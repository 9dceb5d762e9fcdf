package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/launch"
)

// Addresses records where running sandboxes are (launch.Address), in the
// idempotency table: one item per address, sandbox_addr#<ip>, written when
// a task runs and removed when it stops (if it is still that task's), with
// a TTL should the stop never come.
type Addresses struct {
	table *Table
}

// NewAddresses returns the records in idempotencyTable.
func NewAddresses(api API, idempotencyTable string) *Addresses {
	return &Addresses{table: NewTable(api, idempotencyTable)}
}

// addressItem is an address's record.
type addressItem struct {
	Key       string `json:"key"`
	Sandbox   string `json:"sandbox"`
	Ref       string `json:"sandbox_ref"`
	ExpiresAt int64  `json:"expires_at"`
}

func addressKey(a netip.Addr) map[string]string {
	return map[string]string{"key": "sandbox_addr#" + a.Unmap().String()}
}

// Record says a's sandbox runs at a.Addr, until expires at the latest.
func (s *Addresses) Record(ctx context.Context, a launch.Address, expires time.Time) error {
	err := s.table.Put(ctx, addressItem{Key: addressKey(a.Addr)["key"], Sandbox: a.Sandbox, Ref: a.Ref, ExpiresAt: expires.Unix()})
	if err != nil {
		return fmt.Errorf("record the address of %s: %w", a.Sandbox, err)
	}
	return nil
}

// Forget removes addr's record if it is still ref's.
func (s *Addresses) Forget(ctx context.Context, addr netip.Addr, ref string) error {
	err := s.table.Delete(ctx, addressKey(addr), expression.Name("sandbox_ref").Equal(expression.Value(ref)))
	if err != nil && !errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("forget the address %s: %w", addr, err)
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
