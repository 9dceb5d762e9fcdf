package egressproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
)

// upstream is a server that records the headers it was sent.
type upstream struct {
	mu   sync.Mutex
	seen []http.Header
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Header.Clone())
	u.mu.Unlock()
	_, _ = io.WriteString(w, "hello from "+r.URL.Path)
}

func (u *upstream) last(t *testing.T) http.Header {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream got no request")
	}
	return u.seen[len(u.seen)-1]
}

// fixture is a proxy serving sandbox "sb1" with a policy the test sets.
type fixture struct {
	proxy   *Proxy
	url     *url.URL
	mu      sync.Mutex
	grant   Grant
	denials []Denial
	now     time.Time
}

func (f *fixture) set(g Grant) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grant = g
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fixture) denied() []Denial {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Denial(nil), f.denials...)
}

func start(t testing.TB, roots *x509.CertPool) *fixture {
	t.Helper()
	f := &fixture{now: time.Now()}
	up := http.DefaultTransport.(*http.Transport).Clone()
	up.TLSClientConfig = &tls.Config{RootCAs: roots}
	f.proxy = New(Options{
		Lookup: func(_ context.Context, id string) (Grant, error) {
			if id != "sb1" {
				return Grant{}, ErrUnknown
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.grant, nil
		},
		Denied: func(d Denial) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.denials = append(f.denials, d)
		},
		Upstream: up,
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.now
		},
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() { _ = f.proxy.Serve(l, "sb1") }()
	f.url = &url.URL{Scheme: "http", Host: l.Addr().String()}
	return f
}

// client is what a program in the sandbox uses: the proxy, and the roots
// it trusts (the sandbox's authority among them).
func (f *fixture) client(t *testing.T, roots *x509.CertPool) *http.Client {
	t.Helper()
	if roots == nil {
		roots = x509.NewCertPool()
	}
	ca, err := f.proxy.CA("sb1")
	if err != nil {
		t.Fatal(err)
	}
	roots = roots.Clone()
	roots.AppendCertsFromPEM(ca)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.url), TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, u string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func allow(entries ...string) egress.Policy {
	return egress.Policy{Mode: egress.ModeAllowlist, Allow: entries}
}

func TestAllowsWhatThePolicyNames(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	other := httptest.NewServer(up)
	defer other.Close()
	f := start(t, nil)
	f.set(Grant{Policy: allow(strings.TrimPrefix(srv.URL, "http://"))})
	c := f.client(t, nil)

	if code, body := get(t, c, srv.URL+"/a", nil); code != http.StatusOK || body != "hello from /a" {
		t.Fatalf("allowed: %d %q", code, body)
	}
	for range 2 {
		if code, body := get(t, c, other.URL+"/b", nil); code != http.StatusForbidden || !strings.Contains(body, "not allowed by this agent's policy") {
			t.Fatalf("another port: %d %q", code, body)
		}
	}
	// The same address by another loopback name, and a tunnel to it.
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	if code, _ := get(t, c, "http://127.0.0.2:"+strconv.Itoa(port)+"/", nil); code != http.StatusForbidden {
		t.Fatalf("127.0.0.2: %d", code)
	}
	if code, _ := get(t, c, "https://127.0.0.3:443/", nil); code != 0 {
		t.Fatalf("a refused CONNECT got %d", code)
	}
	if d := f.denied(); len(d) != 3 || d[0] != (Denial{Sandbox: "sb1", Host: "127.0.0.1", Port: other.Listener.Addr().(*net.TCPAddr).Port, Reason: DenyNotAllowed}) {
		t.Fatalf("denials (one per destination a minute): %+v", d)
	}
	f.advance(time.Minute)
	get(t, c, other.URL+"/b", nil)
	if d := f.denied(); len(d) != 4 {
		t.Fatalf("a denial a minute later is reported again: %+v", d)
	}

	// A change of policy holds once the cached grant is older than TTL.
	f.set(Grant{Policy: egress.Policy{Mode: egress.ModeNone}})
	if code, _ := get(t, c, srv.URL+"/a", nil); code != http.StatusOK {
		t.Fatalf("within the TTL the old grant holds: %d", code)
	}
	f.advance(DefaultTTL)
	if code, _ := get(t, c, srv.URL+"/a", nil); code != http.StatusForbidden {
		t.Fatalf("after the TTL: %d", code)
	}
}

func TestNeverLinkLocal(t *testing.T) {
	f := start(t, nil)
	f.set(Grant{Policy: egress.Open()})
	c := f.client(t, nil)
	if code, body := get(t, c, "http://169.254.169.254/latest/meta-data/", nil); code != http.StatusForbidden || !strings.Contains(body, "link-local") {
		t.Fatalf("metadata: %d %q", code, body)
	}
	if d := f.denied(); len(d) != 1 || d[0].Reason != DenyLinkLocal {
		t.Fatalf("denials: %+v", d)
	}
}

func TestUnknownSandbox(t *testing.T) {
	f := start(t, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() { _ = f.proxy.Serve(l, "gone") }()
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()})}}
	if code, body := get(t, c, "http://example.com/", nil); code != http.StatusForbidden || !strings.Contains(body, "not known") {
		t.Fatalf("%d %q", code, body)
	}
}

func TestTunnelsUntouchedWithoutARule(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewTLSServer(up)
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	f := start(t, roots)
	host := strings.TrimPrefix(srv.URL, "https://")
	f.set(Grant{Policy: allow(host)})
	// The client trusts the upstream's own certificate only: the tunnel is
	// end to end.
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(f.url), TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if code, body := get(t, c, srv.URL+"/x", http.Header{"Authorization": {"Bearer mine"}}); code != http.StatusOK || body != "hello from /x" {
		t.Fatalf("%d %q", code, body)
	}
	if got := up.last(t).Get("Authorization"); got != "Bearer mine" {
		t.Fatalf("a tunnel changed a header: %q", got)
	}
}

func TestInjectsAtTheProxy(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewTLSServer(up)
	defer srv.Close()
	plain := httptest.NewServer(up)
	defer plain.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	f := start(t, roots)
	tlsHost := strings.TrimPrefix(srv.URL, "https://")
	f.set(Grant{Policy: allow(tlsHost, strings.TrimPrefix(plain.URL, "http://")), Inject: []Injection{
		{Host: "127.0.0.1", PathPrefix: "/api/", Header: "Authorization", Value: "Bearer s3cret"},
	}})
	// The sandbox trusts its authority, not the upstream's certificate.
	c := f.client(t, nil)
	if code, body := get(t, c, srv.URL+"/api/v1", http.Header{"Authorization": {"Bearer forged"}}); code != http.StatusOK || body != "hello from /api/v1" {
		t.Fatalf("%d %q", code, body)
	}
	if got := up.last(t).Get("Authorization"); got != "Bearer s3cret" {
		t.Fatalf("upstream saw Authorization %q", got)
	}
	if code, _ := get(t, c, srv.URL+"/other", nil); code != http.StatusOK || up.last(t).Get("Authorization") != "" {
		t.Fatalf("outside the path prefix: %d, %q", code, up.last(t).Get("Authorization"))
	}
	if code, _ := get(t, c, plain.URL+"/api/x", nil); code != http.StatusOK || up.last(t).Get("Authorization") != "Bearer s3cret" {
		t.Fatalf("plain http: %d, %q", code, up.last(t).Get("Authorization"))
	}
	// A request in the tunnel for another host is misdirected.
	tr := &http.Transport{Proxy: http.ProxyURL(f.url), TLSClientConfig: c.Transport.(*http.Transport).TLSClientConfig}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1", nil)
	req.Host = "evil.example.com"
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("another host in the tunnel: %d", res.StatusCode)
	}
}

// On a shared listener each request's sandbox is who its source address
// is: a request of a sandbox whose record is on its way waits for it; one
// of no sandbox is refused, but for the platform.
func TestServeSharedIdentifiesBySource(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	platform := httptest.NewServer(up)
	defer platform.Close()
	f := start(t, nil)
	f.set(Grant{Policy: allow(strings.TrimPrefix(srv.URL, "http://"))})
	var mu sync.Mutex
	asked, known := 0, false
	p := New(Options{Lookup: f.proxy.o.Lookup, Platform: []string{strings.TrimPrefix(platform.URL, "http://")}, IdentifyWait: 2 * time.Second})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		_ = p.ServeShared(l, func(_ context.Context, from netip.AddrPort) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			asked++
			if !from.Addr().IsLoopback() || (!known && asked < 3) {
				return "", ErrUnknown
			}
			return "sb1", nil
		})
	}()
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()}), DisableKeepAlives: true}}
	if code, body := get(t, c, srv.URL+"/a", nil); code != http.StatusOK {
		t.Fatalf("a sandbox whose record came on the third ask: %d %q", code, body)
	}
	mu.Lock()
	asked, known = -1000, false
	mu.Unlock()
	// Known now (cached): no ask.
	if code, _ := get(t, c, srv.URL+"/a", nil); code != http.StatusOK {
		t.Fatalf("cached: %d", code)
	}
	p.mu.Lock()
	p.senders = map[string]sender{}
	p.mu.Unlock()
	if code, body := get(t, c, srv.URL+"/a", nil); code != http.StatusForbidden || !strings.Contains(body, "not known") {
		t.Fatalf("no sandbox: %d %q", code, body)
	}
	if code, _ := get(t, c, platform.URL+"/p", nil); code != http.StatusOK {
		t.Fatalf("the platform, from no sandbox: %d", code)
	}
}

// Proxies sharing a master sign alike: a sandbox that took its authority
// from one (GET http://CAHost/ca.pem) trusts what another terminates.
func TestProxiesSharingAMasterSignAlike(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewTLSServer(up)
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	grant := Grant{Policy: allow(strings.TrimPrefix(srv.URL, "https://")), Inject: []Injection{{Host: "127.0.0.1", Header: "X-Key", Value: "k"}}}
	serve := func() *url.URL {
		p := New(Options{CAMaster: []byte("master"), Lookup: func(context.Context, string) (Grant, error) { return grant, nil },
			Upstream: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() { _ = p.Serve(l, "sb9") }()
		return &url.URL{Scheme: "http", Host: l.Addr().String()}
	}
	a, b := serve(), serve()
	fetch := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(a)}}
	code, ca := get(t, fetch, "http://"+CAHost+"/ca.pem", nil)
	if code != http.StatusOK || !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Fatalf("the authority from a: %d %q", code, ca)
	}
	trusted := x509.NewCertPool()
	trusted.AppendCertsFromPEM([]byte(ca))
	viaB := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(b), TLSClientConfig: &tls.Config{RootCAs: trusted}}}
	if code, body := get(t, viaB, srv.URL+"/x", nil); code != http.StatusOK || up.last(t).Get("X-Key") != "k" {
		t.Fatalf("through b with a's authority: %d %q", code, body)
	}
}

// A tunnel carries TLS to the server its CONNECT named: a hello that asks
// for another server name (domain fronting) is cut off and reported.
func TestTunnelsCheckTheServerName(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewTLSServer(up)
	defer srv.Close()
	f := start(t, nil)
	host := strings.TrimPrefix(srv.URL, "https://")
	f.set(Grant{Policy: allow(host)})
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	dial := func(connectTo, serverName string) error {
		c, err := net.Dial("tcp", f.url.Host)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		if _, err := io.WriteString(c, "CONNECT "+connectTo+" HTTP/1.1\r\nHost: "+connectTo+"\r\n\r\n"); err != nil {
			return err
		}
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("CONNECT: %d", res.StatusCode)
		}
		tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: roots, InsecureSkipVerify: serverName == "evil.example.com"}) //nolint:gosec // the test's fronting client
		return tc.Handshake()
	}
	if err := dial(host, "127.0.0.1"); err != nil {
		t.Fatalf("a tunnel to its own host: %v", err)
	}
	if err := dial(host, "evil.example.com"); err == nil {
		t.Fatal("a hello for another server name went through")
	}
	found := false
	for _, d := range f.denied() {
		found = found || (d.Host == "evil.example.com" && d.Reason == DenyNotAllowed)
	}
	if !found {
		t.Errorf("the fronting was not reported: %+v", f.denied())
	}
}

// Two sandboxes' listeners, their connections from the same address (each
// its own 127.0.0.1): each request is its listener's sandbox's.
func TestListenersKeepTheirSandboxesApart(t *testing.T) {
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	grants := map[string]Grant{
		"a": {Policy: allow(strings.TrimPrefix(srv.URL, "http://")), Inject: []Injection{{Host: "127.0.0.1", Header: "X-Who", Value: "a"}}},
		"b": {Policy: allow(strings.TrimPrefix(srv.URL, "http://")), Inject: []Injection{{Host: "127.0.0.1", Header: "X-Who", Value: "b"}}},
	}
	p := New(Options{Lookup: func(_ context.Context, id string) (Grant, error) { return grants[id], nil }})
	clients := map[string]*http.Client{}
	for _, id := range []string{"a", "b"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		go func() { _ = p.Serve(l, id) }()
		clients[id] = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()}), DisableKeepAlives: true}}
	}
	for _, id := range []string{"a", "b", "a", "b"} {
		if code, _ := get(t, clients[id], srv.URL+"/", nil); code != http.StatusOK || up.last(t).Get("X-Who") != id {
			t.Fatalf("%s's request went as %q (%d)", id, up.last(t).Get("X-Who"), code)
		}
	}
}
