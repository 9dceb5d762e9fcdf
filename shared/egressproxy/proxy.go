// Package egressproxy is the sandboxes' egress proxy: the one way out of a
// sandbox whose network is cut off (egress.Policy.Isolated), and where the
// credentials its agent uses are added to its requests.
//
// It speaks HTTP proxying: CONNECT host:port for TLS and anything else
// (tunnelled untouched), and absolute http:// requests (forwarded). Each
// connection belongs to one sandbox, known by where it came in (Serve's
// listener), never by anything the sandbox says; what that sandbox may
// reach is looked up (Options.Lookup) and cached for seconds, so a change
// of policy holds within them. A destination the policy does not allow is
// answered 403 and reported (Options.Denied); the link-local range (the
// cloud's metadata and credentials endpoints) is never reached.
//
// For a host with an injection rule (a secret the sandbox may use but not
// read), the proxy terminates the sandbox's TLS with a certificate of the
// sandbox's own authority (CA, which the sandbox trusts and cannot sign
// with), sets the rule's header on each request whose path matches, and
// sends it on over TLS verified as usual.
package egressproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Injection is a header the proxy sets on a sandbox's requests to Host
// (exact, lower case) whose path starts with PathPrefix ("" any).
type Injection struct {
	Host       string
	PathPrefix string
	Header     string
	// Value is the header's value, the secret in it.
	Value string
}

// Grant is what a sandbox may do now: reach what Policy allows, with
// Inject's headers added.
type Grant struct {
	Policy egress.Policy
	Inject []Injection
}

// ErrUnknown is Lookup's answer for a sandbox it does not know (ended, or
// never was): its connections are refused.
var ErrUnknown = errors.New("unknown sandbox")

// Denial is a connection the proxy refused.
type Denial struct {
	Sandbox string
	Host    string
	Port    int
	// Reason is DenyNotAllowed, DenyLinkLocal or DenyUnknownSandbox.
	Reason string
}

// Options configure a Proxy.
type Options struct {
	// Lookup returns what sandbox id may reach; ErrUnknown if no such.
	Lookup func(ctx context.Context, id string) (Grant, error)
	// Platform lists host:port destinations every sandbox reaches whatever
	// its policy (the platform's gateway, model gateway, push channel).
	Platform []string
	// Denied, if set, is told each refusal, at most once a minute for a
	// sandbox, host and port.
	Denied func(Denial)
	// TTL is how long a sandbox's grant is used before it is looked up
	// again; 0 is DefaultTTL.
	TTL time.Duration
	// CALife is how long a sandbox's certificate authority lives; 0 is
	// DefaultCALife.
	CALife time.Duration
	// CAMaster, if set, is the secret every sandbox's authority's key is
	// derived from: the proxies of a fleet that share it sign alike (see
	// CA). Unset, each authority's key is random: one proxy alone.
	CAMaster []byte
	// Upstream is the transport requests go out by (its dialer is the
	// proxy's own); nil, one verifying TLS with the system's roots.
	Upstream *http.Transport
	// IdentifyWait bounds how long ServeShared asks again who a request's
	// sandbox is; 0 is DefaultIdentifyWait.
	IdentifyWait time.Duration
	// Resolver resolves host names; nil, net.DefaultResolver.
	Resolver *net.Resolver
	Log      *slog.Logger
	Now      func() time.Time
}

// DefaultTTL is how long a sandbox's grant is cached: how soon a change of
// policy or of a secret holds.
const DefaultTTL = 2 * time.Second

// DefaultCALife is how long a sandbox's certificate authority lives.
const DefaultCALife = 7 * 24 * time.Hour

// Proxy is the egress proxy. Its methods are safe for concurrent use.
type Proxy struct {
	o        Options
	platform map[string]bool
	upstream *http.Transport
	mu       sync.Mutex
	grants   map[string]cached
	senders  map[string]sender // by source address (ServeShared)
	cas      map[string]*authority
	reported map[Denial]time.Time
}

type cached struct {
	g  Grant
	m  egress.Matcher
	at time.Time
}

// New returns a proxy.
func New(o Options) *Proxy {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.IdentifyWait == 0 {
		o.IdentifyWait = DefaultIdentifyWait
	}
	if o.CALife == 0 {
		o.CALife = DefaultCALife
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	p := &Proxy{o: o, platform: map[string]bool{}, grants: map[string]cached{}, senders: map[string]sender{}, cas: map[string]*authority{}, reported: map[Denial]time.Time{}}
	for _, a := range o.Platform {
		p.platform[strings.ToLower(a)] = true
	}
	up := o.Upstream
	if up == nil {
		up = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		up = up.Clone()
	}
	up.Proxy = nil
	up.DialContext = p.dialUpstream
	up.ForceAttemptHTTP2 = false
	p.upstream = up
	return p
}

// Serve serves sandbox id's connections accepted from l, until l is closed:
// a listener of that sandbox's alone (locally, one in its network
// namespace).
func (p *Proxy) Serve(l net.Listener, id string) error {
	// The listener is the identity: no address is asked about (every
	// sandbox's connections come from its own 127.0.0.1).
	return p.serve(l, func(*http.Request) string { return id })
}

// serve serves l's connections, each request's sandbox the one sandboxOf
// says.
func (p *Proxy) serve(l net.Listener, sandboxOf func(*http.Request) string) error {
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(p.o.Log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			from, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			return context.WithValue(ctx, connKey{}, from)
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.handler(sandboxOf(r)).ServeHTTP(w, r) })}
	err := srv.Serve(l)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// ServeShared serves every sandbox's connections accepted from l, until l
// is closed, each request the sandbox identify names by where its
// connection came from (on AWS, the task's private address, as the load
// balancer keeps it). A request identify names no sandbox for (ErrUnknown)
// is asked again for up to Options.IdentifyWait (the record of a sandbox just
// started may be on its way), then refused as an unknown sandbox's, but
// for the platform's destinations.
func (p *Proxy) ServeShared(l net.Listener, identify func(ctx context.Context, from netip.AddrPort) (string, error)) error {
	return p.serve(l, func(r *http.Request) string {
		from, _ := r.Context().Value(connKey{}).(netip.AddrPort)
		return p.identify(r.Context(), from, identify)
	})
}

// DefaultIdentifyWait bounds how long ServeShared asks again who a
// request's sandbox is.
const DefaultIdentifyWait = 5 * time.Second

// connKey carries, in a connection's context, where it came from.
type connKey struct{}

// identify is the sandbox of a request from from ("" none), cached for the
// TTL once known.
func (p *Proxy) identify(ctx context.Context, from netip.AddrPort, identify func(context.Context, netip.AddrPort) (string, error)) string {
	key := from.Addr().String()
	p.mu.Lock()
	c, ok := p.senders[key]
	p.mu.Unlock()
	now := p.o.Now()
	if ok && now.Sub(c.at) < p.o.TTL {
		return c.id
	}
	deadline := time.Now().Add(p.o.IdentifyWait)
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		id, err := identify(ctx, from)
		if err == nil && id != "" {
			p.mu.Lock()
			if len(p.senders) > 4096 {
				for k, c := range p.senders {
					if now.Sub(c.at) >= p.o.TTL {
						delete(p.senders, k)
					}
				}
			}
			p.senders[key] = sender{id: id, at: now}
			p.mu.Unlock()
			return id
		}
		if err != nil && !errors.Is(err, ErrUnknown) {
			p.o.Log.WarnContext(ctx, "egress proxy: identify a sandbox", slog.String("from", key), slog.String("error", err.Error()))
		}
		if time.Now().Add(wait).After(deadline) {
			return ""
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(wait):
		}
	}
}

// sender is a known source address's sandbox.
type sender struct {
	id string
	at time.Time
}

// CA returns sandbox id's certificate authority, PEM: what its sandbox
// trusts for the hosts the proxy terminates TLS for.
func (p *Proxy) CA(id string) ([]byte, error) {
	a, err := p.authority(id)
	if err != nil {
		return nil, err
	}
	return a.pem, nil
}

// Destinations returns the host:port each of urls is reached at (http and
// ws port 80, https and wss 443 by default), once each: the platform's
// destinations (Options.Platform) from its URLs.
func Destinations(urls ...string) []string {
	var out []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "ws": "80", "https": "443", "wss": "443"}[u.Scheme]
		}
		if d := strings.ToLower(net.JoinHostPort(u.Hostname(), port)); port != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// CAHost is the host a sandbox asks its proxy for its authority's
// certificate at (GET http://CAHost/ca.pem, through the proxy): where a
// sandbox the platform cannot hand files to (a Fargate task) gets what it
// trusts.
const CAHost = sandboxwire.EgressCAHost

// serveCA answers sandbox id's authority's certificate.
func (p *Proxy) serveCA(w http.ResponseWriter, id string) {
	if id == "" {
		http.Error(w, "This sandbox is not known to the egress proxy.", http.StatusForbidden)
		return
	}
	ca, err := p.CA(id)
	if err != nil {
		http.Error(w, "The sandbox's authority could not be made.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	_, _ = w.Write(ca) //nolint:gosec // a certificate we made, served as a PEM file
}

// Forget drops what the proxy keeps of sandbox id (its grant, its
// authority): its sandbox is gone.
func (p *Proxy) Forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.grants, id)
	delete(p.cas, id)
	for d := range p.reported {
		if d.Sandbox == id {
			delete(p.reported, d)
		}
	}
}

func (p *Proxy) authority(id string) (*authority, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.o.Now()
	if a, ok := p.cas[id]; ok && now.Before(a.expires) {
		return a, nil
	}
	a, err := newAuthority(id, p.o.CAMaster, now, p.o.CALife)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: the authority of %s: %w", id, err)
	}
	p.cas[id] = a
	return a, nil
}

// grant returns sandbox id's grant, looked up at most once per TTL.
func (p *Proxy) grant(ctx context.Context, id string) (cached, error) {
	now := p.o.Now()
	p.mu.Lock()
	c, ok := p.grants[id]
	p.mu.Unlock()
	if ok && now.Sub(c.at) < p.o.TTL {
		return c, nil
	}
	g, err := p.o.Lookup(ctx, id)
	if err != nil {
		return cached{}, err
	}
	m, err := egress.Compile(g.Policy)
	if err != nil {
		// A policy that no longer compiles allows nothing.
		m, _ = egress.Compile(egress.Policy{Mode: egress.ModeNone})
	}
	c = cached{g: g, m: m, at: now}
	p.mu.Lock()
	p.grants[id] = c
	p.mu.Unlock()
	return c, nil
}

// sandboxKey carries, in a request's context, whose request it is and the
// addresses its destination may be dialled at.
type sandboxKey struct{}

type route struct {
	sandbox string
	addrs   []netip.Addr // nil: the platform's, dialled by name
}

func (p *Proxy) handler(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			p.connect(w, r, id)
			return
		}
		if r.URL.Host == CAHost && r.Method == http.MethodGet {
			p.serveCA(w, id)
			return
		}
		if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
			http.Error(w, "This is the sandbox's egress proxy: send it absolute http:// requests, or CONNECT for anything else.", http.StatusBadRequest)
			return
		}
		host, port, err := hostPort(r.URL.Host, 80)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c, rt, ok := p.admit(w, r, id, host, port)
		if !ok {
			return
		}
		p.forward(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, rt)), c.g, "http", host, port)
	})
}

// admit checks that sandbox id may reach host:port, and answers the
// refusal if not.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, id, host string, port int) (cached, route, bool) {
	c, rt, v := p.check(r.Context(), id, host, port)
	if v.status == 0 {
		return c, rt, true
	}
	http.Error(w, v.message, v.status)
	if v.reason != "" {
		p.report(Denial{Sandbox: id, Host: host, Port: port, Reason: v.reason})
	}
	return cached{}, route{}, false
}

// verdict is a check's refusal: the status and message to answer, and the
// Denial's reason ("" an error, not a denial); status 0 is no refusal.
type verdict struct {
	status          int
	reason, message string
}

func denied(reason, host string, port int) verdict {
	msg := fmt.Sprintf("Egress to %s is not allowed by this agent's policy.", net.JoinHostPort(host, strconv.Itoa(port)))
	switch reason {
	case DenyLinkLocal:
		msg = "Egress to link-local addresses (the cloud's metadata endpoints) is never allowed."
	case DenyUnknownSandbox:
		msg = "This sandbox is not known to the egress proxy."
	}
	return verdict{status: http.StatusForbidden, reason: reason, message: msg}
}

// The reasons of a Denial.
const (
	DenyNotAllowed     = "not_allowed"
	DenyLinkLocal      = "link_local"
	DenyUnknownSandbox = "unknown_sandbox"
)

// check decides whether sandbox id may reach host:port, and at which
// addresses.
func (p *Proxy) check(ctx context.Context, id, host string, port int) (cached, route, verdict) {
	rt := route{sandbox: id}
	if p.platform[strings.ToLower(net.JoinHostPort(host, strconv.Itoa(port)))] {
		return cached{}, rt, verdict{}
	}
	if id == "" {
		return cached{}, rt, denied(DenyUnknownSandbox, host, port)
	}
	c, err := p.grant(ctx, id)
	if errors.Is(err, ErrUnknown) {
		return c, rt, denied(DenyUnknownSandbox, host, port)
	}
	if err != nil {
		p.o.Log.WarnContext(ctx, "egress proxy: look up a sandbox's policy", slog.String("sandbox", id), slog.String("error", err.Error()))
		return c, rt, verdict{status: http.StatusBadGateway, message: "The sandbox's egress policy could not be read: try again."}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		switch {
		case never(a):
			return c, rt, denied(DenyLinkLocal, host, port)
		case !c.m.AllowsAddr(a, port):
			return c, rt, denied(DenyNotAllowed, host, port)
		}
		rt.addrs = []netip.Addr{a}
		return c, rt, verdict{}
	}
	byName := c.m.AllowsHost(host, port)
	if !byName && !c.m.HasAddrRules() {
		return c, rt, denied(DenyNotAllowed, host, port)
	}
	addrs, err := p.o.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if byName {
			return c, rt, verdict{status: http.StatusBadGateway, message: fmt.Sprintf("%s does not resolve.", host)}
		}
		return c, rt, denied(DenyNotAllowed, host, port)
	}
	reason := DenyNotAllowed
	for _, a := range addrs {
		a = a.Unmap()
		if never(a) {
			reason = DenyLinkLocal
			continue
		}
		if byName || c.m.AllowsAddr(a, port) {
			rt.addrs = append(rt.addrs, a)
		}
	}
	if len(rt.addrs) == 0 {
		return c, rt, denied(reason, host, port)
	}
	return c, rt, verdict{}
}

// never reports whether a is an address no sandbox reaches: link-local
// (169.254.0.0/16, fe80::/10: the cloud's instance and task metadata),
// unspecified or multicast.
func never(a netip.Addr) bool {
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast()
}

// report tells Options.Denied of d, once a minute.
func (p *Proxy) report(d Denial) {
	p.o.Log.Info("egress denied", slog.String("sandbox", d.Sandbox), slog.String("host", d.Host), slog.Int("port", d.Port), slog.String("reason", d.Reason))
	if p.o.Denied == nil || d.Sandbox == "" {
		return
	}
	now := p.o.Now()
	p.mu.Lock()
	last, seen := p.reported[d]
	if !seen || now.Sub(last) >= time.Minute {
		p.reported[d] = now
	}
	if len(p.reported) > 4096 {
		for k, at := range p.reported {
			if now.Sub(at) >= time.Minute {
				delete(p.reported, k)
			}
		}
	}
	p.mu.Unlock()
	if !seen || now.Sub(last) >= time.Minute {
		p.o.Denied(d)
	}
}

// dialUpstream dials a request's destination at the addresses its check
// allowed (the platform's by name).
func (p *Proxy) dialUpstream(ctx context.Context, network, addr string) (net.Conn, error) {
	rt, ok := ctx.Value(sandboxKey{}).(route)
	if !ok {
		return nil, errors.New("egress proxy: a dial without a checked route")
	}
	return p.dial(ctx, rt, addr)
}

func (p *Proxy) dial(ctx context.Context, rt route, addr string) (net.Conn, error) {
	var d net.Dialer
	if rt.addrs == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var first error
	for _, a := range rt.addrs {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// forward sends r on to scheme://host:port with g's injections, and
// copies the answer back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, g Grant, scheme, host string, port int) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
			if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
				pr.Out.URL.Host = host
			}
			pr.Out.Host = pr.In.Host
			inject(pr.Out.Header, g.Inject, host, pr.Out.URL.Path)
		},
		Transport:     p.upstream,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(p.o.Log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("The egress proxy could not reach %s: %v", host, err), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// inject sets the headers of the injections for host whose path prefix
// path has, replacing whatever the sandbox sent in them.
func inject(h http.Header, rules []Injection, host, path string) {
	host = strings.ToLower(host)
	for _, in := range rules {
		if in.Host == host && strings.HasPrefix(path, in.PathPrefix) {
			h.Set(in.Header, in.Value)
		}
	}
}

// injects reports whether a rule of g is for host.
func injects(g Grant, host string) bool {
	host = strings.ToLower(host)
	for _, in := range g.Inject {
		if in.Host == host {
			return true
		}
	}
	return false
}

// connect answers a CONNECT: a tunnel to the destination, or, for a host
// with an injection rule, TLS terminated here.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, id string) {
	host, port, err := hostPort(r.Host, 0)
	if err != nil || port == 0 {
		http.Error(w, "CONNECT needs a host:port.", http.StatusBadRequest)
		return
	}
	c, rt, ok := p.admit(w, r, id, host, port)
	if !ok {
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "The egress proxy cannot tunnel here.", http.StatusInternalServerError)
		return
	}
	var up net.Conn
	terminate := injects(c.g, host)
	if !terminate {
		up, err = p.dial(r.Context(), rt, r.Host)
		if err != nil {
			http.Error(w, fmt.Sprintf("The egress proxy could not reach %s: %v", r.Host, err), http.StatusBadGateway)
			return
		}
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		if up != nil {
			_ = up.Close()
		}
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		_ = conn.Close()
		if up != nil {
			_ = up.Close()
		}
		return
	}
	client := &bufferedConn{Conn: conn, r: brw.Reader}
	if terminate {
		p.terminate(client, id, host, port)
		return
	}
	// A TLS client names the server it wants in its hello (SNI): through a
	// tunnel to host, only host (a name that is not would reach another
	// site behind the same address: a CDN's, say).
	name, isTLS, read, err := sniServerName(client)
	if err != nil {
		_ = client.Close()
		_ = up.Close()
		return
	}
	if isTLS && name != "" && name != host {
		p.o.Log.Info("egress denied: a tunnel's server name is not its host", slog.String("sandbox", id), slog.String("host", host), slog.String("server_name", name))
		p.report(Denial{Sandbox: id, Host: name, Port: port, Reason: DenyNotAllowed})
		_ = client.Close()
		_ = up.Close()
		return
	}
	splice(&replay{Conn: client, r: io.MultiReader(bytes.NewReader(read), client)}, up)
}

// splice copies between a and b until both directions end.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(a, b)
	go pipe(b, a)
	<-done
	<-done
	_ = a.Close()
	_ = b.Close()
}

// hostPort splits an authority (host, host:port, [v6]:port), def the port
// when it names none.
func hostPort(authority string, def int) (string, int, error) {
	host, p, err := net.SplitHostPort(authority)
	if err != nil {
		h := strings.TrimSuffix(strings.TrimPrefix(authority, "["), "]")
		if h == "" || strings.ContainsAny(h, "/ ") {
			return "", 0, fmt.Errorf("%q is not a host", authority)
		}
		return strings.ToLower(h), def, nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || host == "" {
		return "", 0, fmt.Errorf("%q is not a host:port", authority)
	}
	return strings.ToLower(host), n, nil
}

// bufferedConn is a hijacked connection read through the server's reader,
// which may hold bytes the client sent already.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection, where it can.
func (c *bufferedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
