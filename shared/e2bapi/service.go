// Package e2bapi serves the sandbox API: the E2B control plane as the E2B
// SDKs speak it (package e2b is its wire), under /e2b. A sandbox is one of
// the app's agents (a session with no initial prompt, of the agent type its
// template names): created, connected to, paused, resumed and killed through
// the same services as the agents (session, fleet), under the same quotas and
// budgets, in the same fleet list, events and webhooks. The client runs its
// processes and files through envd, behind the sandbox proxy, with the
// access token create and connect answer (package envdtoken).
package e2bapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/e2b"
	"github.com/remote-agents/remote-agents/shared/envdtoken"
	"github.com/remote-agents/remote-agents/shared/fleet"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// Store is what the sandbox API reads and changes of sessions.
type Store interface {
	Get(ctx context.Context, id string) (session.Session, error)
	SetEndsAt(ctx context.Context, id string, at time.Time, extendOnly bool) (session.Session, error)
	ListByTenant(ctx context.Context, tenant string, f session.ListFilter, limit int, after string) ([]session.Session, string, error)
}

// Creator makes sandboxes (session.Creator).
type Creator interface {
	Authenticate(ctx context.Context, secret string) (registry.AppKey, error)
	CreateSandbox(ctx context.Context, app registry.AppKey, req session.SandboxRequest) (session.Created, error)
}

// Fleet kills, pauses and resumes an app's agents (fleet.Service).
type Fleet interface {
	Kill(ctx context.Context, id, bearer string) (fleet.KillStatus, error)
	Pause(ctx context.Context, id, bearer string) (fleet.PauseStatus, error)
	Resume(ctx context.Context, id, bearer string, in fleet.ResumeRequest) (fleet.PauseStatus, error)
}

// Publisher sends jobs-queue messages (a sandbox's session.expire).
type Publisher interface {
	Publish(ctx context.Context, m jobqueue.Message, delay time.Duration) error
}

// Options configure a Service.
type Options struct {
	Store   Store
	Creator Creator
	Fleet   Fleet
	Jobs    Publisher
	// Tokens mints the sandboxes' envd access tokens.
	Tokens envdtoken.Key
	// Domain is the sandbox domain answered to the SDKs ("": the client's
	// own, E2B_DOMAIN or E2B_SANDBOX_URL).
	Domain string
	Log    *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Service is the sandbox API.
type Service struct {
	o Options
}

// New returns the sandbox API with options o.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Service{o: o}
}

// Caller is an authenticated client: its app key and the secret it sent
// (the bearer of the fleet's actions).
type Caller struct {
	App    registry.AppKey
	Secret string
}

// Authenticate returns the caller of an X-API-Key.
func (s *Service) Authenticate(ctx context.Context, secret string) (Caller, error) {
	app, err := s.o.Creator.Authenticate(ctx, secret)
	if err != nil {
		return Caller{}, err
	}
	return Caller{App: app, Secret: secret}, nil
}

// Create makes a sandbox of in's template and answers it once envd is up.
func (s *Service) Create(ctx context.Context, c Caller, in e2b.NewSandbox) (e2b.Sandbox, error) {
	if p := in.Problem(); p != "" {
		return e2b.Sandbox{}, apierror.New(apierror.InvalidRequest, "%s.", p)
	}
	req := session.SandboxRequest{
		SandboxOptions: session.SandboxOptions{Template: in.TemplateID, Metadata: in.Metadata, Env: in.EnvVars,
			AutoPause: in.AutoPause != nil && *in.AutoPause, AutoResume: in.AutoResume != nil && in.AutoResume.Enabled,
			PrivateTraffic: in.PrivateTraffic()},
		Timeout: time.Duration(in.LifeSeconds()) * time.Second,
		Offline: in.AllowInternetAccess != nil && !*in.AllowInternetAccess,
	}
	created, err := s.o.Creator.CreateSandbox(ctx, c.App, req)
	if err != nil {
		return e2b.Sandbox{}, err
	}
	return s.answer(c, created.AgentID, in.TemplateID, in.PrivateTraffic()), nil
}

// Connect answers a running sandbox, resuming a paused one first
// (resumed: 201 rather than 200); its end moves to timeout seconds from
// now if that is later.
func (s *Service) Connect(ctx context.Context, c Caller, id string, in e2b.ConnectRequest) (e2b.Sandbox, bool, error) {
	sess, err := s.sandbox(ctx, c, id)
	if err != nil {
		return e2b.Sandbox{}, false, err
	}
	life := e2b.DefaultTimeout
	if in.Timeout != nil {
		if *in.Timeout < 1 || *in.Timeout > e2b.MaxTimeout {
			return e2b.Sandbox{}, false, apierror.New(apierror.InvalidRequest, "timeout must be 1 to %d seconds.", e2b.MaxTimeout)
		}
		life = *in.Timeout
	}
	// The end first: a sandbox paused at its end is past it, and a resumed
	// one past its end would be ended at its first heartbeat.
	if err := s.endIn(ctx, sess, time.Duration(life)*time.Second, true); err != nil {
		return e2b.Sandbox{}, false, err
	}
	resumed := false
	if state(sess) == e2b.StatePaused {
		if sess.State == session.Pausing {
			// Its checkpoint first: a pause answers once it is paused.
			if _, err := s.o.Fleet.Pause(ctx, id, c.Secret); err != nil {
				return e2b.Sandbox{}, false, err
			}
		}
		after, err := s.o.Fleet.Resume(ctx, id, c.Secret, fleet.ResumeRequest{})
		if err != nil {
			return e2b.Sandbox{}, false, err
		}
		if after.State != session.Ready && after.State != session.Working && after.State != session.Idle {
			return e2b.Sandbox{}, false, &apierror.Error{Code: apierror.ServiceUnavailable, RetryAfter: 1,
				Message: fmt.Sprintf("The sandbox is %s, not yet running; connect again.", after.State)}
		}
		resumed = true
	}
	return s.answer(c, sess.ID, sess.Sandbox.Template, sess.Sandbox.PrivateTraffic), resumed, nil
}

// SetTimeout makes a sandbox end timeout seconds from now, sooner or later
// than it would have.
func (s *Service) SetTimeout(ctx context.Context, c Caller, id string, in e2b.TimeoutRequest) error {
	sess, err := s.sandbox(ctx, c, id)
	if err != nil {
		return err
	}
	if in.Timeout < 1 || in.Timeout > e2b.MaxTimeout {
		return apierror.New(apierror.InvalidRequest, "timeout must be 1 to %d seconds.", e2b.MaxTimeout)
	}
	return s.endIn(ctx, sess, time.Duration(in.Timeout)*time.Second, false)
}

// endIn moves the end of sess to d from now (with extendOnly, only later)
// and queues its expiry.
func (s *Service) endIn(ctx context.Context, sess session.Session, d time.Duration, extendOnly bool) error {
	now := s.o.Now()
	at := now.Add(d).Truncate(time.Millisecond)
	after, err := s.o.Store.SetEndsAt(ctx, sess.ID, at, extendOnly)
	if errors.Is(err, session.ErrConflict) {
		if extendOnly {
			return nil // it ends later already, or it is over (the next call says so)
		}
		return notFound(sess.ID)
	}
	if err != nil {
		return err
	}
	m, delay := jobqueue.ExpireAt(after.ID, after.Generation, at, now)
	if err := s.o.Jobs.Publish(ctx, m, delay); err != nil {
		return apierror.Unavailable(err)
	}
	return nil
}

// Kill ends a sandbox now. ok is false for one that was over already.
func (s *Service) Kill(ctx context.Context, c Caller, id string) (bool, error) {
	if _, err := s.sandbox(ctx, c, id); err != nil {
		if apierror.CodeOf(err) == apierror.NotFound {
			return false, nil
		}
		return false, err
	}
	out, err := s.o.Fleet.Kill(ctx, id, c.Secret)
	if err != nil {
		return false, err
	}
	return out.Status == fleet.Killed, nil
}

// Pause pauses a running sandbox on a checkpoint of its files. ok is false
// for one paused already (the SDKs' 409).
func (s *Service) Pause(ctx context.Context, c Caller, id string) (bool, error) {
	sess, err := s.sandbox(ctx, c, id)
	if err != nil {
		return false, err
	}
	if state(sess) == e2b.StatePaused {
		return false, nil
	}
	if _, err := s.o.Fleet.Pause(ctx, id, c.Secret); err != nil {
		return false, err
	}
	return true, nil
}

// Info answers a sandbox.
func (s *Service) Info(ctx context.Context, c Caller, id string) (e2b.Detail, error) {
	sess, err := s.sandbox(ctx, c, id)
	if err != nil {
		return e2b.Detail{}, err
	}
	return s.detail(c, sess), nil
}

// maxListRounds bounds the index pages one list call reads, however few of
// them its filter keeps.
const maxListRounds = 5

// List answers a page of the app's sandboxes that f selects, and the token
// of the next ("" none).
func (s *Service) List(ctx context.Context, c Caller, f e2b.ListFilter) ([]e2b.Detail, string, error) {
	out := []e2b.Detail{}
	cursor := f.NextToken
	filter := session.ListFilter{States: []session.State{session.Provisioning, session.Ready, session.Working, session.Idle,
		session.Pausing, session.Paused, session.Resuming}}
	for range maxListRounds {
		got, next, err := s.o.Store.ListByTenant(ctx, c.App.Tenant, filter, f.Limit-len(out), cursor)
		if errors.Is(err, session.ErrBadCursor) {
			return nil, "", apierror.New(apierror.InvalidRequest, "nextToken is not one this list returned.")
		}
		if err != nil {
			return nil, "", fmt.Errorf("list sandboxes: %w", err)
		}
		for _, sess := range got {
			if sess.Sandbox != nil && f.Matches(sess.Sandbox.Metadata, state(sess)) {
				out = append(out, s.detail(c, sess))
			}
		}
		cursor = next
		if cursor == "" || len(out) >= f.Limit {
			break
		}
	}
	return out, cursor, nil
}

// sandbox reads sandbox id of the caller's app: not found when it is no
// sandbox of the sandbox API, another tenant's, or over.
func (s *Service) sandbox(ctx context.Context, c Caller, id string) (session.Session, error) {
	if !session.ValidID(id) {
		return session.Session{}, notFound(id)
	}
	sess, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) || (err == nil && (sess.Tenant != c.App.Tenant || sess.Sandbox == nil || state(sess) == "")) {
		return session.Session{}, notFound(id)
	}
	return sess, err
}

func notFound(id string) error {
	return apierror.New(apierror.NotFound, "Sandbox %q not found.", id)
}

// state is sess as the SDKs name its state: running, paused, or "" over.
func state(sess session.Session) string {
	switch sess.State {
	case session.Provisioning, session.Ready, session.Working, session.Idle, session.Resuming:
		return e2b.StateRunning
	case session.Pausing, session.Paused:
		return e2b.StatePaused
	}
	return ""
}

// answer is what create and connect answer of sandbox id: with a traffic
// access token when its previews are private.
func (s *Service) answer(c Caller, id, template string, private bool) e2b.Sandbox {
	out := e2b.Sandbox{SandboxID: id, ClientID: c.App.ID, TemplateID: template, Alias: template,
		EnvdVersion: sandboxwire.EnvdVersion, EnvdAccessToken: s.o.Tokens.Token(id)}
	if private {
		tok := s.o.Tokens.TrafficToken(id)
		out.TrafficAccessToken = &tok
	}
	if s.o.Domain != "" {
		out.Domain = &s.o.Domain
	}
	return out
}

// Default sandbox size: the sandbox task's own, where its type names none.
const (
	defaultCPUUnits  = 1024
	defaultMemoryMiB = 2048
)

// detail is sess as info and the list answer it.
func (s *Service) detail(c Caller, sess session.Session) e2b.Detail {
	size := tasksize.Size{CPUUnits: defaultCPUUnits, MemoryMiB: defaultMemoryMiB, DiskGiB: tasksize.MinDiskGiB}
	if w := sess.Workspace; w != nil {
		if got, err := tasksize.Parse(w.ResourceLimits.CPU, w.ResourceLimits.Memory, w.ResourceLimits.Disk); err == nil {
			size.CPUUnits = cmp.Or(got.CPUUnits, size.CPUUnits)
			size.MemoryMiB = cmp.Or(got.MemoryMiB, size.MemoryMiB)
			size.DiskGiB = cmp.Or(got.DiskGiB, size.DiskGiB)
		}
	}
	md := map[string]string{}
	maps.Copy(md, sess.Sandbox.Metadata)
	return e2b.Detail{
		SandboxID: sess.ID, TemplateID: sess.Sandbox.Template, ClientID: c.App.ID, Alias: sess.Sandbox.Template,
		StartedAt: sess.CreatedAt.UTC(), EndAt: sess.EndsAt.UTC(), State: state(sess),
		CPUCount: max(size.CPUUnits/1024, 1), MemoryMB: size.MemoryMiB, DiskSizeMB: size.DiskGiB * 1024,
		EnvdVersion: sandboxwire.EnvdVersion, Metadata: md,
	}
}
