package sandboxwire

import (
	"net/netip"
)

// internalPrefixes are the IPv4 ranges, besides loopback, private (RFC 1918)
// and link-local, that name no host on the Internet: "this network",
// carrier-grade NAT (RFC 6598), IETF protocol assignments, benchmarking,
// reserved and broadcast.
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64
// (RFC 6052) and IPv4-compatible addresses (::a.b.c.d).
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	compatible = netip.MustParsePrefix("::/96")
)

// InternalAddress reports whether a sandbox must not connect to ip on behalf
// of a model or an app (web_fetch, a workspace's clone) unless the operator
// allows that address: loopback (127/8, ::1), private (10/8, 172.16/12,
// 192.168/16, fc00::/7), link-local (169.254/16, where the cloud metadata and
// credential services answer, and fe80::/10), unspecified, multicast, the
// ranges of internalPrefixes, and any of these written as IPv6 (IPv4-mapped
// ::ffff:a.b.c.d, IPv4-compatible, NAT64). An invalid address is internal:
// the check fails closed.
func InternalAddress(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.Unmap()
	if ip.Is6() && (nat64.Contains(ip) || compatible.Contains(ip)) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range internalPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return ip.Is4() && ip == netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
