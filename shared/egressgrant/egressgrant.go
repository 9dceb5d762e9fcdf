// Package egressgrant tells the egress proxy what a sandbox may reach now,
// by the sandbox's identity: its session's egress policy (as create
// resolved it and PATCH …/egress changed it), with the headers of the
// secrets its agent type names; a warm pool sandbox, before a session
// claims it, its agent type's. It also turns the proxy's refusals into the
// session's egress.denied events.
package egressgrant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/egressproxy"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/metrics"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/secrets"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Sessions reads sessions and appends their events (session.Store).
type Sessions interface {
	Get(ctx context.Context, id string) (session.Session, error)
	AppendEvents(ctx context.Context, id string, generation int, evs []session.Event) ([]session.Event, error)
}

// PoolSandboxes reads warm pool sandboxes (pool.Store).
type PoolSandboxes interface {
	Get(ctx context.Context, id string) (pool.Sandbox, error)
}

// Types resolves agent types as sessions copy them (agenttype.Service).
type Types interface {
	Resolve(ctx context.Context, tenant, id string) (registry.AgentType, error)
}

// Secrets returns the injections of the secrets of the given names of a
// tenant's user (its own where the user has none; package secrets); a name
// neither has is left out.
type Secrets interface {
	Injections(ctx context.Context, tenant, endUser string, names []string) ([]secrets.Header, error)
}

// Options configure a Service.
type Options struct {
	Sessions Sessions
	Pool     PoolSandboxes // nil: no warm pools
	Types    Types         // nil: no warm pools
	Secrets  Secrets       // nil: no secrets
	// Addresses finds sandboxes by their private address (Identify); nil:
	// only sandboxes of listeners of their own (locally).
	Addresses Addresses
	Log       *slog.Logger
	Now       func() time.Time
}

// Service looks up grants.
type Service struct{ o Options }

// New returns a Service.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o}
}

// Lookup returns what sandbox id may reach now (egressproxy.Options.Lookup):
// egressproxy.ErrUnknown for a sandbox of no live session.
func (s *Service) Lookup(ctx context.Context, id string) (egressproxy.Grant, error) {
	if strings.HasPrefix(id, pool.IDPrefix) {
		return s.poolGrant(ctx, id)
	}
	sess, err := s.o.Sessions.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		return egressproxy.Grant{}, egressproxy.ErrUnknown
	}
	if err != nil {
		return egressproxy.Grant{}, fmt.Errorf("egress grant of %s: %w", id, err)
	}
	return s.sessionGrant(ctx, sess)
}

func (s *Service) sessionGrant(ctx context.Context, sess session.Session) (egressproxy.Grant, error) {
	if sess.State.Terminal() {
		return egressproxy.Grant{}, egressproxy.ErrUnknown
	}
	g := egressproxy.Grant{Policy: sess.EgressPolicy()}
	if sess.Workspace != nil && len(sess.Workspace.Secrets) > 0 && s.o.Secrets != nil {
		headers, err := s.o.Secrets.Injections(ctx, sess.Tenant, sess.EndUser, sess.Workspace.Secrets)
		if err != nil {
			return egressproxy.Grant{}, fmt.Errorf("egress grant of %s: secrets: %w", sess.ID, err)
		}
		for _, h := range headers {
			g.Inject = append(g.Inject, egressproxy.Injection{Host: h.Host, PathPrefix: h.PathPrefix, Header: h.Name, Value: h.Value})
		}
	}
	return g, nil
}

// poolGrant is a warm pool sandbox's: its claiming session's once claimed,
// else its agent type's (with the fixed repository it prepares).
func (s *Service) poolGrant(ctx context.Context, id string) (egressproxy.Grant, error) {
	if s.o.Pool == nil {
		return egressproxy.Grant{}, egressproxy.ErrUnknown
	}
	sb, err := s.o.Pool.Get(ctx, id)
	if errors.Is(err, pool.ErrNotFound) {
		return egressproxy.Grant{}, egressproxy.ErrUnknown
	}
	if err != nil {
		return egressproxy.Grant{}, fmt.Errorf("egress grant of %s: %w", id, err)
	}
	if sb.ClaimedBy != "" {
		return s.Lookup(ctx, sb.ClaimedBy)
	}
	if s.o.Types == nil {
		return egressproxy.Grant{}, egressproxy.ErrUnknown
	}
	tenant := sb.Owner
	t, err := s.o.Types.Resolve(ctx, tenant, sb.AgentType)
	if err != nil {
		// A type gone meanwhile: its sandbox reaches nothing.
		s.o.Log.WarnContext(ctx, "egress grant of a pool sandbox: its agent type", slog.String("pool_sandbox", id), slog.String("error", err.Error()))
		return egressproxy.Grant{Policy: egress.Policy{Mode: egress.ModeNone}}, nil
	}
	p := session.EgressFor(&t.Workspace, nil)
	if p == nil {
		open := egress.Open()
		p = &open
	}
	return egressproxy.Grant{Policy: *p}, nil
}

// Denied appends d to its session's events (egressproxy.Options.Denied):
// egress.denied, which the app and the embed view see; and counts it
// (metrics.EgressDenied, by tenant).
func (s *Service) Denied(d egressproxy.Denial) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := d.Sandbox
	if strings.HasPrefix(id, pool.IDPrefix) {
		if s.o.Pool == nil {
			return
		}
		sb, err := s.o.Pool.Get(ctx, id)
		if err != nil || sb.ClaimedBy == "" {
			return // a warm sandbox's: nobody reads its events
		}
		id = sb.ClaimedBy
	}
	sess, err := s.o.Sessions.Get(ctx, id)
	if err != nil || sess.State.Terminal() {
		return
	}
	metrics.Emit(ctx, s.o.Log, sess.Tenant, []metrics.Value{{Name: metrics.EgressDenied, Value: 1, Unit: "Count"}},
		slog.String("session_id", sess.ID), slog.String("host", d.Host), slog.Int("port", d.Port), slog.String("reason", d.Reason))
	ev := sandboxwire.EgressDenied{Host: d.Host, Port: d.Port, Reason: d.Reason,
		Message: fmt.Sprintf("The agent's sandbox tried to reach %s:%d, which its egress policy does not allow.", d.Host, d.Port)}
	if d.Reason == egressproxy.DenyLinkLocal {
		ev.Message = fmt.Sprintf("The agent's sandbox tried to reach %s:%d, a link-local (cloud metadata) address, which no egress policy allows.", d.Host, d.Port)
	}
	e, err := session.NewEvent(ev)
	if err != nil {
		return
	}
	e.At = s.o.Now().UTC()
	if _, err := s.o.Sessions.AppendEvents(ctx, sess.ID, sess.Generation, []session.Event{e}); err != nil {
		s.o.Log.WarnContext(ctx, "append egress.denied", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
}

// Addresses finds the sandbox recorded at a private address
// (dynamo.Addresses): the worker records each sandbox task's when it runs.
type Addresses interface {
	// At returns the sandbox at addr; launch.ErrNoAddress if none.
	At(ctx context.Context, addr netip.Addr) (launch.Address, error)
}

// Identify is the sandbox a connection from from is of
// (egressproxy.Proxy.ServeShared): the one recorded at its address, if it
// still runs there (its session, or warm pool sandbox, holds the recorded
// task); egressproxy.ErrUnknown otherwise.
func (s *Service) Identify(ctx context.Context, from netip.AddrPort) (string, error) {
	if s.o.Addresses == nil {
		return "", egressproxy.ErrUnknown
	}
	a, err := s.o.Addresses.At(ctx, from.Addr().Unmap())
	if errors.Is(err, launch.ErrNoAddress) {
		return "", egressproxy.ErrUnknown
	}
	if err != nil {
		return "", err
	}
	ref := ""
	if strings.HasPrefix(a.Sandbox, pool.IDPrefix) {
		if s.o.Pool == nil {
			return "", egressproxy.ErrUnknown
		}
		sb, err := s.o.Pool.Get(ctx, a.Sandbox)
		if errors.Is(err, pool.ErrNotFound) {
			return "", egressproxy.ErrUnknown
		}
		if err != nil {
			return "", err
		}
		ref = sb.Ref
	} else {
		sess, err := s.o.Sessions.Get(ctx, a.Sandbox)
		if errors.Is(err, session.ErrNotFound) {
			return "", egressproxy.ErrUnknown
		}
		if err != nil {
			return "", err
		}
		ref = sess.SandboxRef
	}
	if ref == "" || ref != a.Ref {
		// Recorded before the launch was (the task runs before its ref is
		// stored): not known yet, asked again; or an older task's.
		return "", egressproxy.ErrUnknown
	}
	return a.Sandbox, nil
}
