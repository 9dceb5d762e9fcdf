// Package sandboxproxy is the one entry point to every sandbox's envd (the
// E2B sandbox API): a request names its sandbox by the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers (the SDKs' E2B_SANDBOX_URL) or by its host,
// <port>-<id>.<domain>; its X-Access-Token must be the sandbox's envd
// access token (package envdtoken: what the sandbox API answers) or one of
// its agent's session tokens; it is then streamed both ways, unbuffered, to
// the sandbox. A sandbox that is not running (paused, resuming, ended) is 502,
// which the SDKs read as "not running". Locally the dev server serves it
// in-process on its own port; on AWS it is a small service on Fargate.
package sandboxproxy

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/e2b"
	"github.com/remote-agents/remote-agents/shared/envdtoken"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Headers the E2B SDKs name a sandbox and its port with.
const (
	HeaderSandboxID   = "E2b-Sandbox-Id"
	HeaderSandboxPort = "E2b-Sandbox-Port"
	HeaderAccessToken = "X-Access-Token"
)

// Dialer reaches a running session's sandbox on a port (envd's,
// sandboxwire.EnvdPort, or one the agent opened).
type Dialer interface {
	DialSandbox(ctx context.Context, sess session.Session, port int) (net.Conn, error)
}

// Options configure a Proxy.
type Options struct {
	Store  session.Reader
	Dialer Dialer
	// Tokens checks envd access tokens.
	Tokens envdtoken.Key
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Log is where the proxy logs; nil: slog.Default().
	Log *slog.Logger
}

// Proxy is the sandbox proxy's handler.
type Proxy struct {
	o  Options
	rp *httputil.ReverseProxy
}

// ctxKey carries the target of a request to the reverse proxy's dial.
type ctxKey struct{}

type target struct {
	sess session.Session
	port int
}

// New returns the proxy.
func New(o Options) *Proxy {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	p := &Proxy{o: o}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			t, _ := ctx.Value(ctxKey{}).(target)
			// Every port is reached through envd's: envd's port is the
			// only one open to the proxy, and envd reaches the others
			// from inside the sandbox (CONNECT, package envd).
			conn, err := o.Dialer.DialSandbox(ctx, t.sess, sandboxwire.EnvdPort)
			if err != nil || t.port == sandboxwire.EnvdPort {
				return conn, err
			}
			return through(ctx, conn, t.port)
		},
		// Connections are kept per target: the URL's host names the
		// sandbox's launch and port (Rewrite), which the pool is keyed by.
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			t, _ := r.In.Context().Value(ctxKey{}).(target)
			r.SetURL(&url.URL{Scheme: "http", Host: fmt.Sprintf("%s.g%d.p%d", t.sess.ID, t.sess.Generation, t.port)})
			r.Out.Host = r.In.Host
			r.Out.Header.Del(HeaderAccessToken)
			r.Out.Header.Del(e2b.TrafficTokenHeader)
		},
		Transport:     transport,
		FlushInterval: -1, // streams: every write at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// What envd said of a port is the client's to read; how the
			// sandbox is reached (its address, its socket) is not.
			var pe *portError
			if errors.As(err, &pe) {
				writeError(w, http.StatusBadGateway, "The sandbox's "+pe.Error()+".")
				return
			}
			o.Log.WarnContext(r.Context(), "sandbox proxy: the sandbox cannot be reached", slog.String("error", err.Error()))
			writeError(w, http.StatusBadGateway, "The sandbox cannot be reached.")
		},
	}
	return p
}

// writeError writes the error body envd and the E2B API answer with.
var writeError = e2b.WriteError

// route is the sandbox and port r names: by headers, else by host.
func route(r *http.Request) (id string, port int, err error) {
	if id = r.Header.Get(HeaderSandboxID); id != "" {
		port = sandboxwire.EnvdPort
		if p := r.Header.Get(HeaderSandboxPort); p != "" {
			if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
				return "", 0, errors.New("E2b-Sandbox-Port is not a port")
			}
		}
		return id, port, nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, _, ok := strings.Cut(host, ".")
	p, rest, dash := strings.Cut(label, "-")
	if !ok || !dash {
		return "", 0, errors.New("name the sandbox: E2b-Sandbox-Id, or a host <port>-<sandbox id>.<domain>")
	}
	if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
		return "", 0, errors.New("the host's port is not a port")
	}
	return rest, port, nil
}

// ServeHTTP routes r to its sandbox.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, err := route(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// envd's GET /health answers whether the sandbox runs, to anyone who
	// names it (the SDKs ask without a token after a broken stream).
	tok := r.Header.Get(HeaderAccessToken)
	preview := port != sandboxwire.EnvdPort
	var sess session.Session
	switch {
	case preview && tok == "":
		sess, err = p.authorizePreview(r.Context(), id, r.Header.Get(e2b.TrafficTokenHeader))
	case tok == "" && r.Method == http.MethodGet && r.URL.Path == "/health":
		sess, err = p.find(r.Context(), id)
	default:
		sess, err = p.authorize(r.Context(), id, tok)
	}
	if errors.Is(err, errNoSandbox) {
		writeError(w, http.StatusBadGateway, "No such sandbox.")
		return
	}
	if err != nil {
		writeError(w, statusOf(err), messageOf(err))
		return
	}
	if !slices.Contains(session.Running, sess.State) {
		writeError(w, http.StatusBadGateway, "The sandbox is "+string(sess.State)+", not running.")
		return
	}
	// Full duplex: the request body goes on being read while the answer is
	// written. Without it net/http discards what is left of the body once
	// the answer's headers go out, under the transport still copying it to
	// the sandbox (a stream's body ended by a chunked terminator that comes
	// after envd has answered), and the stream is cut.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		writeError(w, http.StatusInternalServerError, "The sandbox proxy cannot stream: "+err.Error())
		return
	}
	ctx := context.WithValue(r.Context(), ctxKey{}, target{sess: sess, port: port})
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// authorize finds sandbox id for the holder of tok: its envd access
// token, or one of its agent's session tokens.
func (p *Proxy) authorize(ctx context.Context, id, tok string) (session.Session, error) {
	if !strings.HasPrefix(tok, envdtoken.Prefix) {
		return session.Authorize(ctx, p.o.Store, id, tok, p.o.Now())
	}
	invalid := apierror.New(apierror.InvalidToken, "The access token is not valid for this sandbox.")
	if !session.ValidID(id) || !p.o.Tokens.Check(id, tok) {
		return session.Session{}, invalid
	}
	sess, err := p.o.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		return session.Session{}, invalid
	}
	return sess, err
}

// authorizePreview finds sandbox id for a visit to one of its preview URLs
// without an access token: one with its traffic access token (traffic), or
// anyone's, when the sandbox was created with public traffic (E2B's
// default). An agent created otherwise than as a sandbox of the sandbox API
// has no public previews: its access token or a session token opens them.
func (p *Proxy) authorizePreview(ctx context.Context, id, traffic string) (session.Session, error) {
	sess, err := p.find(ctx, id)
	if err != nil {
		return session.Session{}, err
	}
	switch {
	case traffic != "" && p.o.Tokens.CheckTraffic(id, traffic):
		return sess, nil
	case traffic != "":
		return session.Session{}, apierror.New(apierror.InvalidToken, "The traffic access token is not valid for this sandbox.")
	case sess.Sandbox == nil || sess.Sandbox.PrivateTraffic:
		return session.Session{}, apierror.New(apierror.InvalidToken,
			"This sandbox's ports are private: send its traffic access token in the %s header, or its access token in %s.", e2b.TrafficTokenHeader, HeaderAccessToken)
	}
	return sess, nil
}

// find reads sandbox id, for a request that names it without an access
// token; errNoSandbox if there is none.
func (p *Proxy) find(ctx context.Context, id string) (session.Session, error) {
	if !session.ValidID(id) {
		return session.Session{}, errNoSandbox
	}
	sess, err := p.o.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		return session.Session{}, errNoSandbox
	}
	return sess, err
}

// errNoSandbox: the sandbox named does not exist. It is answered as one
// that does not run is (502), so that a visit learns nothing more.
var errNoSandbox = errors.New("no such sandbox")

// through asks envd, on conn, for a connection to port inside the sandbox
// (CONNECT 127.0.0.1:<port>) and returns it, or an error saying why not.
func through(ctx context.Context, conn net.Conn, port int) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	br := bufio.NewReader(conn)
	_, err := io.WriteString(conn, req)
	if err == nil {
		var res *http.Response
		if res, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err == nil {
			if res.StatusCode != http.StatusOK {
				body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
				err = &portError{port: port, said: strings.TrimSpace(string(body))}
			}
			// A 200's body is the tunnel, delimited by the connection's
			// close: closing it reads nothing.
			_ = res.Body.Close()
		}
	}
	if err != nil || !stop() {
		_ = conn.Close()
		return nil, cmp.Or(err, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	return &readerConn{Conn: conn, r: br}, nil
}

// portError is envd's refusal of a connection to a port of the sandbox's.
type portError struct {
	port int
	said string
}

func (e *portError) Error() string { return fmt.Sprintf("port %d: %s", e.port, e.said) }

// readerConn is a connection whose first bytes were read into r.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// statusOf is the HTTP status of err, by the error table.
func statusOf(err error) int { return httpapi.Status(apierror.CodeOf(err)) }

// messageOf is what err says to a client: its message, nothing internal.
func messageOf(err error) string {
	var ae *apierror.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return "The sandbox proxy could not check the request; try again."
}
