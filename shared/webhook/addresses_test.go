package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/remote-agents/remote-agents/shared/webhook"
)

// dnsServer answers A queries on UDP loopback with whatever address it is
// set to: a name that rebinds.
type dnsServer struct {
	mu   sync.Mutex
	addr netip.Addr
	conn net.PacketConn
}

func newDNSServer(t *testing.T) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn}
	t.Cleanup(func() { _ = conn.Close() })
	go s.serve()
	return s
}

func (s *dnsServer) set(a string) { s.mu.Lock(); defer s.mu.Unlock(); s.addr = netip.MustParseAddr(a) }

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		s.mu.Lock()
		addr := s.addr
		s.mu.Unlock()
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		if q.Type == dnsmessage.TypeA && addr.Is4() {
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: addr.As4()})
		}
		out, err := b.Finish()
		if err == nil {
			_, _ = s.conn.WriteTo(out, from)
		}
	}
}

// resolver resolves every name at s.
func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.conn.LocalAddr().String())
	}}
}

// TestRefusesANameThatRebindsToAPrivateAddress: a name that resolved to a
// public address at create and resolves to a private or metadata one at
// delivery is refused at the dial; one that resolves to a private address
// at create is refused there.
func TestRefusesANameThatRebindsToAPrivateAddress(t *testing.T) {
	t.Parallel()
	dns := newDNSServer(t)
	a := webhook.Addresses{Resolver: dns.resolver()}
	dns.set("93.184.215.14")
	if err := a.CheckURL(t.Context(), "https://hooks.example.test/in"); err != nil {
		t.Fatalf("a name of a public address refused at create: %v", err)
	}
	for _, to := range []string{"127.0.0.1", "169.254.169.254", "10.0.0.7"} {
		dns.set(to)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://hooks.example.test/in", strings.NewReader("{}"))
		_, err := a.Client().Do(req)
		if !errors.Is(err, webhook.ErrAddress) {
			t.Errorf("delivery to a name now at %s: %v, want ErrAddress at the dial", to, err)
		}
	}
	dns.set("10.0.0.7")
	if err := a.CheckURL(t.Context(), "https://hooks.example.test/in"); !errors.Is(err, webhook.ErrAddress) {
		t.Errorf("a name of a private address at create: %v, want ErrAddress", err)
	}
}

// TestAddresses: what deliveries may reach, with and without loopback.
func TestAddresses(t *testing.T) {
	t.Parallel()
	public := webhook.Addresses{}
	local := webhook.Addresses{Loopback: true}
	for _, tt := range []struct {
		ip            string
		public, local bool
	}{
		{"93.184.215.14", true, true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"::ffff:10.1.2.3", false, false},
		{"10.1.2.3", false, false},
		{"172.16.0.1", false, false},
		{"192.168.1.1", false, false},
		{"169.254.169.254", false, false},
		{"fd00:ec2::254", false, false},
		{"fe80::1", false, false},
		{"100.64.0.1", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"255.255.255.255", false, false},
		{"64:ff9b::a9fe:a9fe", false, false},
		{"2002:a9fe:a9fe::1", false, false},
	} {
		ip := netip.MustParseAddr(tt.ip)
		if got := public.Allowed(ip); got != tt.public {
			t.Errorf("AWS settings allow %s: %v, want %v", tt.ip, got, tt.public)
		}
		if got := local.Allowed(ip); got != tt.local {
			t.Errorf("make dev's settings allow %s: %v, want %v", tt.ip, got, tt.local)
		}
	}
	for _, u := range []string{"http://127.0.0.1:1/x", "https://[::1]/x", "https://localhost/x", "https://169.254.169.254/", "http://93.184.215.14/", "https://a.localhost/"} {
		if err := public.CheckURL(t.Context(), u); err == nil {
			t.Errorf("AWS settings accept %s", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:1/x", "https://[::1]/x"} {
		if err := local.CheckURL(t.Context(), u); err != nil {
			t.Errorf("make dev's settings refuse %s: %v", u, err)
		}
	}
}

// FuzzCheckURL: whatever CheckURL takes is an absolute https URL (or http
// to loopback where loopback is allowed) naming no credentials, whose host,
// if an address, is one a delivery may reach.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://93.184.215.14/x", "http://127.0.0.1:8080/h", "https://[::ffff:169.254.169.254]/", "https://u@1.1.1.1/", "//x", "https://1.1.1.1#f"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, loopback bool) {
		a := webhook.Addresses{Loopback: loopback, Resolver: &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no DNS in the fuzzer")
		}}}
		if err := a.CheckURL(t.Context(), raw); err != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.User != nil || u.Scheme != "https" && (u.Scheme != "http" || !loopback) {
			t.Fatalf("accepted %q", raw)
		}
		ip, err := netip.ParseAddr(u.Hostname())
		if err != nil {
			t.Fatalf("accepted %q, whose host does not resolve here", raw)
		}
		if !a.Allowed(ip) || u.Scheme == "http" && !ip.Unmap().IsLoopback() {
			t.Fatalf("accepted %q, at %s", raw, ip)
		}
	})
}
