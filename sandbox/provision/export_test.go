package provision

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// Resolve makes the sandbox resolve name to addr for the rest of t.
func Resolve(t *testing.T, name string, addr netip.Addr) {
	prev := lookup.Load()
	r := resolver(func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == name {
			return []netip.Addr{addr}, nil
		}
		if prev != nil {
			return (*prev)(ctx, host)
		}
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	})
	lookup.Store(&r)
	t.Cleanup(func() { lookup.Store(prev) })
}
