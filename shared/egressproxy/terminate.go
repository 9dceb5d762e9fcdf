package egressproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// terminate serves a tunnel to host:port whose TLS the proxy ends: the
// sandbox's requests are read here, their headers injected, and sent on.
func (p *Proxy) terminate(conn net.Conn, id, host string, port int) {
	a, err := p.authority(id)
	if err != nil {
		p.o.Log.Warn("egress proxy: terminate TLS", slog.String("sandbox", id), slog.String("error", err.Error()))
		_ = conn.Close()
		return
	}
	tlsConn := tls.Server(conn, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return a.leaf(host, p.o.Now())
		},
	})
	authority := net.JoinHostPort(host, strconv.Itoa(port))
	srv := &http.Server{
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.o.Log.Handler(), slog.LevelDebug),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The tunnel was opened to host: a request in it for another
			// goes nowhere (and takes no header meant for host).
			if h, _, err := hostPort(r.Host, port); err != nil || h != host {
				http.Error(w, "This tunnel is for "+authority+".", http.StatusMisdirectedRequest)
				return
			}
			c, rt, ok := p.admit(w, r, id, host, port)
			if !ok {
				return
			}
			r.URL.Scheme, r.URL.Host = "https", authority
			p.forward(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, rt)), c.g, "https", host, port)
		}),
	}
	_ = srv.Serve(&oneConn{c: tlsConn, closed: make(chan struct{})})
}

// oneConn is a listener of one connection: Accept returns it, then waits
// until it is closed.
type oneConn struct {
	c      net.Conn
	once   sync.Once
	taken  bool
	mu     sync.Mutex
	closed chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	taken := l.taken
	l.taken = true
	l.mu.Unlock()
	if !taken {
		return &closeNotify{Conn: l.c, l: l}, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

// closeNotify closes its listener when it is closed.
type closeNotify struct {
	net.Conn
	l *oneConn
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	_ = c.l.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil // the server closes it more than once
	}
	return err
}
