package tools

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/policy"
)

// TestSecurityWebFetchDialRefusesInternalAddresses (issue 19): the dial of a
// direct web_fetch (directTransport), where every connection is made after
// names resolved and for each address tried, refuses every internal address
// before connecting: link-local metadata (AWS, ECS, GCP/Azure's, AWS's IPv6),
// loopback, the private ranges, unique local IPv6, IPv4-mapped and NAT64
// forms of them, unspecified, carrier-grade NAT. A public address is let
// through to the connection attempt (which fails here, with no network, but
// not as the policy's refusal), and an internal address the allowlist names
// is dialled.
func TestSecurityWebFetchDialRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dial := func(p *policy.Policy, address string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		c, err := directTransport(p).DialContext(ctx, "tcp", address)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	p, err := policy.Parse("[tools.web_fetch]\nallow_domains = [\"example.com\"]\n", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, address := range []string{
		"169.254.169.254:80", "169.254.170.2:80", "[fd00:ec2::254]:80", "[::ffff:169.254.169.254]:80", "[64:ff9b::a9fe:a9fe]:80",
		net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("127.0.0.2", strconv.Itoa(port)), net.JoinHostPort("::1", strconv.Itoa(port)),
		net.JoinHostPort("::ffff:127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("0.0.0.0", strconv.Itoa(port)),
		"10.0.0.1:80", "10.255.255.254:443", "172.16.0.1:80", "172.31.255.1:80", "192.168.0.1:80", "[fc00::1]:80", "[fe80::1]:80",
		"100.64.0.1:80", "[::]:80",
	} {
		t.Run(address, func(t *testing.T) {
			err := dial(p, address)
			if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), "internal address") {
				t.Errorf("dial %s: %v, want the policy's refusal", address, err)
			}
			t.Logf("checked: dial %s refused before connecting", address)
		})
	}
	select {
	case <-accepted:
		t.Error("a refused dial reached the loopback listener")
	default:
	}
	// A public address passes the guard (the connection itself may fail:
	// there may be no network here).
	if err := dial(p, "192.0.2.1:9"); errors.Is(err, policy.ErrDenied) {
		t.Errorf("a public address was refused: %v", err)
	}
	allowed, err := policy.Parse("[tools.web_fetch]\nallow_domains = [\"127.0.0.1\"]\n", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(allowed, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		t.Errorf("127.0.0.1, named in allow_domains: %v", err)
	}
	if err := dial(allowed, net.JoinHostPort("127.0.0.2", strconv.Itoa(port))); !errors.Is(err, policy.ErrDenied) {
		t.Errorf("127.0.0.2, not named: %v", err)
	}
	t.Logf("checked: a public address passes the guard; 127.0.0.1 named in allow_domains is dialled, 127.0.0.2 is not")
}
