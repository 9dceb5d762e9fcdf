// Package poolwait is a warm-pool sandbox's wait for a session (sandboxwire's
// pool.go): a sandbox launched with RA_POOL_SANDBOX waits for a session
// before it is any session's. It exchanges its launch code for its pool key,
// holds a push connection as its pool sandbox, says it is idle and
// heart-beats until a session claims it (an assigned frame, or a heartbeat
// answer naming the session), then exchanges its pool key as that session's
// bootstrap code for the sandbox token. From there on the run loop goes on as
// for a sandbox launched for the session.
package poolwait

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/sandbox/push"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Config is a pool sandbox's identity and pacing, and the workspace it
// prepares before its claim.
type Config struct {
	// PoolSandbox is the pool sandbox id; LaunchCode its launch code (see
	// sandboxwire.EnvPoolSandbox).
	PoolSandbox, LaunchCode string
	// PushURL is the push channel ("" none: the sandbox heart-beats as often
	// as Poll instead).
	PushURL         string
	Heartbeat, Poll time.Duration
	// Workspace, Tools, ToolUser, Secrets and Tmux are as remote.Config's:
	// the pool key joins Secrets.
	Workspace string
	Tools     *toolenv.Env
	ToolUser  *toolenv.User
	Secrets   *redact.Secrets
	Tmux      string
}

// Claim is how the wait ends when a session claimed the sandbox: the session
// and the sandbox token it got for it.
type Claim struct {
	Session, Token string
	// Prepared is what the sandbox provisioned before its claim (nil none).
	Prepared *provision.Prepared
}

// poolEventKind is what the pool's push listener saw.
type poolEventKind int

const (
	// poolPushUp: the push connection is up (each connect).
	poolPushUp poolEventKind = iota
	// poolPushDown: a connect failed or the connection ended.
	poolPushDown
	// poolAssigned: an assigned frame, naming its session (or not).
	poolAssigned
)

// poolEvent is one thing the pool's push listener saw.
type poolEvent struct {
	kind    poolEventKind
	session string
}

// pool is a pool sandbox's wait: cl calls the gateway (with the pool key as
// its bearer once it has one); events brings what the push listener saw.
type pool struct {
	c      Config
	cl     *gateway.Client
	log    *slog.Logger
	key    string
	events chan poolEvent
	beat   *time.Ticker
	// up says the push connection is up; idle that a heartbeat said idle.
	up, idle bool
}

// Wait is the pool phase of the run loop, calling the gateway through cl: it
// returns the session that claimed the sandbox with the sandbox token for
// it, or nil when the sandbox is to stop without one (the pool's orders, the
// pool forgot it, or ctx ended). The launch code is spent first, and
// forgotten.
func Wait(ctx context.Context, cl *gateway.Client, c Config, log *slog.Logger) (*Claim, error) {
	p := &pool{c: c, cl: cl, log: log, events: make(chan poolEvent, 16)}
	boot, err := p.bootstrap(ctx)
	if err != nil {
		return nil, err
	}
	key := boot.PoolKey
	c.Secrets.Add(key)
	c.LaunchCode = ""
	p.c, p.cl, p.key = c, cl.WithToken(key), key
	prepared, err := prepare(ctx, c, boot.Workspace, log)
	if err != nil {
		return nil, err
	}
	log.Info("pool sandbox waiting for a session", slog.String("pool_sandbox", c.PoolSandbox))
	claim, err := p.wait(ctx)
	if claim != nil {
		claim.Prepared = prepared
	}
	return claim, err
}

// prepare provisions, before any claim, what the pool asks for (a fixed
// repository's clone and setup commands) in the workspace, which is the
// tools' user's first, as for a session.
func prepare(ctx context.Context, c Config, ws *sandboxwire.WorkspaceSpec, log *slog.Logger) (*provision.Prepared, error) {
	if ws == nil {
		return nil, nil
	}
	if err := c.ToolUser.OwnTree(c.Workspace); err != nil {
		return nil, err
	}
	var env []string
	if c.Tools != nil {
		env = c.Tools.Environ()
	}
	began := time.Now()
	prepared := provision.Prepare(ctx, *ws, provision.Options{Dir: c.Workspace, Env: env, User: c.ToolUser, Secrets: c.Secrets, Log: log, Tmux: c.Tmux})
	log.Info("pool sandbox prepared its workspace", slog.String("repository", sandboxwire.RedactURL(ws.RepositoryURL)),
		slog.Int("setup_commands", len(ws.SetupCommands)), slog.Duration("took", time.Since(began)))
	return prepared, nil
}

// path is the path of the pool sandbox's route.
func (p *pool) path(route string) string {
	return sandboxwire.PoolPrefix + url.PathEscape(p.c.PoolSandbox) + "/" + route
}

// bootstrap exchanges the launch code for the pool key. Like a session's
// bootstrap code, it works once: a refusal is final, a transport failure or
// 5xx is retried.
func (p *pool) bootstrap(ctx context.Context) (sandboxwire.PoolBootstrapResponse, error) {
	var out sandboxwire.PoolBootstrapResponse
	if p.c.LaunchCode == "" {
		return out, errors.New("pool sandbox: no launch code")
	}
	if err := p.cl.WithToken(p.c.LaunchCode).DoPath(ctx, http.MethodPost, p.path(sandboxwire.RouteBootstrap), "pool bootstrap", nil, &out); err != nil {
		return out, fmt.Errorf("exchange the launch code: %w", err)
	}
	if out.PoolKey == "" {
		return out, errors.New("exchange the launch code: the gateway sent no pool key")
	}
	return out, nil
}

// wait waits in the pool until a session claims the sandbox or it is to stop
// (see Wait). With a push channel, the first heartbeat (which says the
// sandbox is idle) goes once it is connected, or after one heartbeat period if
// it cannot connect; without one, at once.
func (p *pool) wait(ctx context.Context) (*Claim, error) {
	pushCtx, stopPush := context.WithCancel(ctx)
	listening := p.listen(pushCtx)
	defer func() {
		stopPush()
		<-listening // the pool connection is closed before the session's opens
	}()
	p.beat = time.NewTicker(p.c.Heartbeat)
	defer p.beat.Stop()
	if p.c.PushURL == "" {
		p.beat.Reset(p.period())
		if claim, done := p.heartbeat(ctx); done {
			return claim, nil
		}
	}
	for {
		var claim *Claim
		var done bool
		select {
		case <-ctx.Done():
			p.log.Info("pool sandbox stopping: signal")
			return nil, nil
		case <-p.beat.C:
			claim, done = p.heartbeat(ctx)
		case ev := <-p.events:
			claim, done = p.handle(ctx, ev)
		}
		if done {
			return claim, nil
		}
	}
}

// period is the heartbeat period: the configured one while the push channel
// is up, otherwise as often as the inbox is polled (a claim is noticed only
// through heartbeats then).
func (p *pool) period() time.Duration {
	if p.up {
		return p.c.Heartbeat
	}
	return min(cmp.Or(p.c.Poll, time.Second), p.c.Heartbeat)
}

// listen holds the pool's push connection, if there is a push channel, until
// ctx ends, passing what it sees to p.events; the channel it returns is closed
// once the listener is gone.
func (p *pool) listen(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if p.c.PushURL == "" {
		close(done)
		return done
	}
	send := func(ev poolEvent) {
		select {
		case p.events <- ev:
		case <-ctx.Done():
		}
	}
	peer := push.Peer{
		Param: sandboxwire.PushPoolParam, ID: p.c.PoolSandbox, Bearer: p.key,
		Connected: func() { send(poolEvent{kind: poolPushUp}) },
		Frame: func(f sandboxwire.Push) {
			if f.Type == sandboxwire.PushAssigned {
				send(poolEvent{kind: poolAssigned, session: f.Session})
			}
		},
		Down: func(err error, retryIn time.Duration) {
			p.log.Info("pool push channel down; heart-beating until it is back", slog.String("error", err.Error()), slog.Duration("retry_in", retryIn))
			send(poolEvent{kind: poolPushDown})
		},
	}
	go func() {
		defer close(done)
		push.Hold(ctx, p.c.PushURL, peer, p.log)
	}()
	return done
}

// handle acts on what the push listener saw: a connect is a heartbeat (which
// says idle the first time, and brings an assignment missed while the
// connection was down); an assigned frame is the session's bootstrap at once,
// or a heartbeat when the frame names no valid session.
func (p *pool) handle(ctx context.Context, ev poolEvent) (*Claim, bool) {
	switch ev.kind {
	case poolPushUp:
		p.up = true
		p.beat.Reset(p.period())
		return p.heartbeat(ctx)
	case poolPushDown:
		p.up = false
		p.beat.Reset(p.period())
		return nil, false
	}
	if !validSession(ev.session) {
		p.log.Warn("assigned frame without a valid session id; asking the pool", slog.String("session_id", ev.session))
		return p.heartbeat(ctx)
	}
	return p.claim(ctx, ev.session)
}

// heartbeat says the sandbox is idle and acts on the answer: a session
// claims it; stop, or a refusal (the pool forgot it), stops it. A failed
// heartbeat (after the client's retries) is logged: the next one tries again.
func (p *pool) heartbeat(ctx context.Context) (*Claim, bool) {
	var orders sandboxwire.PoolOrders
	err := p.cl.DoPath(ctx, http.MethodPost, p.path(sandboxwire.RouteHeartbeat), "pool heartbeat", sandboxwire.PoolHeartbeat{Idle: true}, &orders)
	switch {
	case forgotten(err):
		p.log.Info("pool sandbox stopping: the pool does not know it", slog.String("error", err.Error()))
		return nil, true
	case err != nil:
		if ctx.Err() == nil {
			p.log.Warn("pool heartbeat failed", slog.String("error", err.Error()))
		}
		return nil, false
	case orders.Stop:
		p.log.Info("pool sandbox stopping: the pool says so")
		return nil, true
	}
	if !p.idle {
		p.idle = true
		p.log.Info("pool sandbox idle", slog.String("pool_sandbox", p.c.PoolSandbox))
	}
	if orders.SessionID == "" {
		return nil, false
	}
	if !validSession(orders.SessionID) {
		p.log.Warn("pool heartbeat named an invalid session id", slog.String("session_id", orders.SessionID))
		return nil, false
	}
	return p.claim(ctx, orders.SessionID)
}

// validSession reports whether id is a session id (a UUID, in its usual
// form), fit for a route's path.
func validSession(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && strings.EqualFold(u.String(), id)
}

// forgotten reports whether err is the pool's refusal of a heartbeat (401,
// 403, 404): it no longer knows the sandbox.
func forgotten(err error) bool {
	var auth *gateway.AuthError
	var status *gateway.StatusError
	return errors.As(err, &auth) || (errors.As(err, &status) && status.Status == http.StatusNotFound)
}

// claim exchanges the pool key as session's bootstrap code for its sandbox
// token. A refusal is a stale or wrong assignment, and another failure (after
// the client's retries) one that a later heartbeat may bring again: either
// way the sandbox goes on waiting.
func (p *pool) claim(ctx context.Context, session string) (*Claim, bool) {
	token, err := p.cl.WithSession(session).Bootstrap(ctx, p.key)
	var auth *gateway.AuthError
	switch {
	case errors.As(err, &auth):
		p.log.Info("pool assignment refused; still waiting", slog.String("session_id", session), slog.String("error", err.Error()))
		return nil, false
	case err != nil:
		if ctx.Err() == nil {
			p.log.Warn("pool assignment failed; still waiting", slog.String("session_id", session), slog.String("error", err.Error()))
		}
		return nil, false
	}
	return &Claim{Session: session, Token: token}, true
}
