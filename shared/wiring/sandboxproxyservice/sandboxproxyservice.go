// Package sandboxproxyservice builds and runs the sandbox proxy service of
// an Env (services/sandboxproxy): on AWS a Fargate service behind an
// internet-facing Application Load Balancer, the way in to every sandbox's
// envd (what the E2B SDKs' E2B_SANDBOX_URL names), which API Gateway and
// Lambda cannot be: they neither hold long streams nor reach a task. Each
// request is checked (package sandboxproxy: its access token, with the key
// the sandbox API mints them with, e2bservice.Tokens) and streamed to its
// session's sandbox task at the private address the worker recorded when
// the task ran (package taskdial).
package sandboxproxyservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy/taskdial"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/e2bservice"
)

// Timeouts of the service's connections.
const (
	// ReadHeaderTimeout bounds a request's headers; nothing bounds its
	// body or its answer (no ReadTimeout, no WriteTimeout): a stream of
	// envd's (a command's output, an upload) lasts as long as it lasts.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout keeps an idle connection open longer than the load
	// balancer does (config.SandboxProxyIdleTimeout), as AWS advises: the
	// balancer, not the proxy, closes it, and never under a request it is
	// sending.
	IdleTimeout = config.SandboxProxyIdleTimeout + time.Minute
	// ShutdownGrace is how long the requests in flight at a SIGTERM get to
	// end before they are cut: under ECS's 30 s between its SIGTERM and its
	// SIGKILL. The balancer has stopped sending the task requests by then
	// (it drains a target before ECS stops it).
	ShutdownGrace = 25 * time.Second
)

// Service is the sandbox proxy service.
type Service struct {
	proxy http.Handler
	log   *slog.Logger
	// drain is closed when the service starts shutting down.
	drain chan struct{}
}

// Draining is closed once the service is shutting down: its health checks
// fail from then on.
func (s *Service) Draining() <-chan struct{} { return s.drain }

// Build builds the service of e: the proxy over its sessions table, the
// addresses the worker records in its idempotency table, and the envd
// access tokens' key (RA_E2B_TOKEN_SECRET).
func Build(ctx context.Context, e *wiring.Env) (*Service, error) {
	tokens, err := e2bservice.Tokens(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("sandbox proxy: %w", err)
	}
	if e.Config.E2B.TokenSecret == "" {
		// Session tokens still work; the envd access tokens the sandbox API
		// answers do not (its key is another random one).
		e.Log.WarnContext(ctx, "sandbox proxy: RA_E2B_TOKEN_SECRET is unset: no envd access token the sandbox API mints is valid here")
	}
	dial := &taskdial.Dialer{Addresses: dynamo.NewAddresses(e.DynamoDB(), e.Resources.Idempotency.Name)}
	proxy := sandboxproxy.New(sandboxproxy.Options{Store: e.SessionStore(), Dialer: dial, Tokens: tokens, Log: e.Log})
	return &Service{proxy: proxy, log: e.Log, drain: make(chan struct{})}, nil
}

// Health answers the load balancer's health checks, on a listener of its
// own (RA_SANDBOX_PROXY_HEALTH_ADDR): on the proxy's, every path is a
// sandbox's, envd's GET /health among them. Any GET is 200 while the
// service takes requests, 503 once it is shutting down.
func (s *Service) Health() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		select {
		case <-s.drain:
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		default:
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Serve serves the sandboxes' requests accepted from l and the health
// checks accepted from health until ctx ends; then it shuts down: the
// health checks fail, no connection is accepted, and the requests in
// flight get ShutdownGrace to end before they are cut. It returns nil
// after a shutdown, else why it stopped serving.
func (s *Service) Serve(ctx context.Context, l, health net.Listener) error {
	errorLog := slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	srv := &http.Server{Handler: s.proxy, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout, ErrorLog: errorLog}
	hc := &http.Server{Handler: s.Health(), ReadHeaderTimeout: ReadHeaderTimeout, ErrorLog: errorLog}
	failed := make(chan error, 2)
	for _, run := range []func() error{func() error { return srv.Serve(l) }, func() error { return hc.Serve(health) }} {
		go func() {
			if err := run(); !errors.Is(err, http.ErrServerClosed) {
				failed <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
	}
	close(s.drain)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	if serr := srv.Shutdown(stop); serr != nil {
		s.log.Warn("sandbox proxy: requests cut at shutdown", slog.String("error", serr.Error()))
		_ = srv.Close()
	}
	_ = hc.Close()
	if err != nil {
		return fmt.Errorf("sandbox proxy: %w", err)
	}
	return nil
}

// Run runs the service of e, serving at its RA_SANDBOX_PROXY_ADDR and
// answering health checks at its RA_SANDBOX_PROXY_HEALTH_ADDR, until ctx
// ends.
func Run(ctx context.Context, e *wiring.Env) error {
	s, err := Build(ctx, e)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", e.Config.SandboxProxy.Addr)
	if err != nil {
		return fmt.Errorf("sandbox proxy: %w", err)
	}
	health, err := lc.Listen(ctx, "tcp", e.Config.SandboxProxy.HealthAddr)
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("sandbox proxy: health checks: %w", err)
	}
	e.Log.Info("sandbox proxy listening", "addr", l.Addr().String(), "health", health.Addr().String())
	return s.Serve(ctx, l, health)
}
