package webhook

import (
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

var base32NoPad = base32.StdEncoding.WithPadding(base32.NoPadding)

// Addresses says which addresses deliveries may reach: public unicast
// ones, never private, loopback, link-local (the instance metadata
// service), shared, multicast or reserved ones, checked for the names an
// endpoint's URL gives at its create and for every connection at its dial,
// after DNS, so a name that resolves elsewhere later is refused as well.
type Addresses struct {
	// Loopback lets deliveries reach loopback addresses and localhost
	// (RA_WEBHOOKS_LOOPBACK: make dev's receivers on the same machine).
	Loopback bool
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// blocked are the ranges no delivery reaches, beside what Allowed checks
// with netip's predicates.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (carrier NAT)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64: an IPv4 address in disguise
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("2002::/16"), // 6to4
}

// Allowed reports whether a delivery may connect to ip.
func (a Addresses) Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if a.Loopback && ip.IsLoopback() {
		return true
	}
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// ErrAddress is the error of a URL or a connection to an address
// deliveries may not reach.
var ErrAddress = errors.New("address not allowed")

// CheckURL checks an endpoint's URL at its create: absolute, https (http
// only to loopback where loopback is allowed), no credentials, at most
// MaxURLBytes, and a host every address of which is allowed. It answers why
// not, for the client.
func (a Addresses) CheckURL(ctx context.Context, raw string) error {
	if len(raw) > MaxURLBytes {
		return fmt.Errorf("url is longer than %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return errors.New("url must be an absolute http(s) URL")
	}
	if u.User != nil {
		return errors.New("url must not hold credentials")
	}
	if u.Fragment != "" {
		return errors.New("url must not have a fragment")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("url has no host")
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	local := lower == "localhost" || strings.HasSuffix(lower, ".localhost")
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && a.Loopback:
	default:
		return errors.New("url must be https")
	}
	if strings.HasSuffix(lower, ".internal") || (local && !a.Loopback) {
		return fmt.Errorf("%w: %s is not a public host", ErrAddress, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if !a.Allowed(ip) {
			return fmt.Errorf("%w: %s is not a public address", ErrAddress, host)
		}
		return a.httpLoopbackOnly(u.Scheme, []netip.Addr{ip})
	}
	ips, err := a.resolver().LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return fmt.Errorf("url's host %s does not resolve", host)
	}
	for _, ip := range ips {
		if !a.Allowed(ip) {
			return fmt.Errorf("%w: %s resolves to %s, not a public address", ErrAddress, host, ip.Unmap())
		}
	}
	return a.httpLoopbackOnly(u.Scheme, ips)
}

// httpLoopbackOnly refuses plain http to anything but loopback.
func (a Addresses) httpLoopbackOnly(scheme string, ips []netip.Addr) error {
	if scheme != "http" {
		return nil
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return errors.New("url must be https (http is for loopback receivers only)")
		}
	}
	return nil
}

func (a Addresses) resolver() *net.Resolver {
	if a.Resolver != nil {
		return a.Resolver
	}
	return net.DefaultResolver
}

// Client is the HTTP client deliveries use: every connection's address
// checked at its dial (after DNS), no proxy from the environment, no
// redirect followed (a 3xx is an answer, and not a success), Timeout per
// attempt.
func (a Addresses) Client() *http.Client {
	d := &net.Dialer{
		Timeout:  Timeout,
		Resolver: a.Resolver,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !a.Allowed(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrAddress, address)
			}
			return nil
		},
	}
	return &http.Client{
		Timeout: Timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           d.DialContext,
			TLSHandshakeTimeout:   Timeout,
			ResponseHeaderTimeout: Timeout,
			MaxIdleConnsPerHost:   4,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
