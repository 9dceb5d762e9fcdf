package envd

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// tunnelDialTimeout bounds reaching a port of the sandbox's.
const tunnelDialTimeout = 5 * time.Second

// tunnel serves CONNECT 127.0.0.1:<port>: a connection to a port the
// sandbox's processes listen on (a preview URL's), from inside the sandbox,
// spliced both ways. The sandbox proxy reaches every port this way, through
// envd's alone (only envd's port is open to it, and a server that listens on
// loopback only is reached too). Only the sandbox's loopback is reachable:
// anything else is 403, and a port nothing listens on 502.
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r.Header) {
		http.Error(w, "the access token is missing or wrong", http.StatusUnauthorized)
		return
	}
	host, p, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		http.Error(w, "CONNECT names 127.0.0.1:<port>", http.StatusBadRequest)
		return
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		http.Error(w, "only the sandbox's own ports are reachable", http.StatusForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), tunnelDialTimeout)
	defer cancel()
	up, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", p))
	if err != nil {
		http.Error(w, "nothing answers on port "+p+" in the sandbox", http.StatusBadGateway)
		return
	}
	down, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		http.Error(w, "cannot tunnel on this connection", http.StatusInternalServerError)
		return
	}
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_, _ = up.Close(), down.Close()
		return
	}
	splice(down, buf.Reader, up)
}

// splice copies both ways between a (whose reader, ar, may hold bytes
// already read) and b until both directions end, then closes both.
func splice(a net.Conn, ar io.Reader, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst net.Conn, src io.Reader) {
		_, _ = io.Copy(dst, src)
		// The other side may still answer: say this one is done.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Go(func() { half(b, ar) })
	wg.Go(func() { half(a, b) })
	wg.Wait()
	_, _ = a.Close(), b.Close()
}
