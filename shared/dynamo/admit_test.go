package dynamo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/registry"
	domain "github.com/remote-agents/remote-agents/shared/session"
)

// TestCreatesWithinTheLiveQuota: 200 creates at once against a live quota of
// 150, through the create service on DynamoDB Local, leave exactly 150 live
// and answer 50 with 429 quota_exceeded; once every agent has ended, by
// either end, the tenant's live count is back at 0 and a create goes
// through.
func TestCreatesWithinTheLiveQuota(t *testing.T) {
	t.Parallel()
	set, _ := awstest.Resources(t)
	// 150 ends at once move one counter: DynamoDB Local, on a loaded
	// machine, times some of their transactions out waiting for its lock,
	// and they are retried. What runs out then is the SDK client's own
	// retry budget (a token bucket per client), not anything this checks:
	// the client here has none, as 150 Lambda invocations would each have
	// their own.
	api := dynamodb.NewFromConfig(awstest.Config(t), func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(r *retry.StandardOptions) {
			r.RateLimiter, r.MaxAttempts = ratelimit.None, 10
		})
	})
	store := dynamo.NewSessions(api, set.Sessions.Name, set.Idempotency.Name, set.Events.Name)
	g := guardrails.File(filepath.Join(t.TempDir(), "guardrails.md"))
	if err := os.WriteFile(string(g), []byte("# Rules\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const creates, quota = 200, 150
	creator := domain.NewCreator(domain.CreatorOptions{
		Store: store, Quotas: domain.Quotas{ConcurrentSessions: quota, CreatesPerMinute: 1000}, Registry: oneProject{},
		Guardrails: g, Jobs: readyOnStart{store}, CreationTimeout: time.Minute,
	})
	app := registry.AppKey{ID: "k1", Tenant: "t-quota"}
	var mu sync.Mutex
	var live []string
	refused := 0
	var wg sync.WaitGroup
	for range creates {
		wg.Go(func() {
			c, err := creator.Create(t.Context(), app, domain.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello"})
			mu.Lock()
			defer mu.Unlock()
			var e *apierror.Error
			switch {
			case err == nil:
				live = append(live, c.AgentID)
			case errors.As(err, &e) && e.Code == apierror.QuotaExceeded:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if len(live) != quota || refused != creates-quota {
		t.Fatalf("%d created, %d refused; want %d and %d", len(live), refused, quota, creates-quota)
	}
	if n, err := store.LiveCount(t.Context(), app.Tenant); err != nil || n != quota {
		t.Fatalf("live count %d (%v), want %d", n, err, quota)
	}
	if n, err := store.CountLive(t.Context(), app.Tenant, 1000); err != nil || n != quota {
		t.Errorf("the by_live index counts %d (%v), want %d", n, err, quota)
	}
	// The ends race each other on the tenant's counter, 10 at a time: 150
	// at once, each a transaction and its lifecycle event, outrun what
	// DynamoDB Local (shared by every suite of make test) serves on a
	// loaded 2-core machine within the event's write bound.
	ending := make(chan struct{}, 10)
	for i, id := range live {
		wg.Go(func() {
			ending <- struct{}{}
			defer func() { <-ending }()
			to := []domain.State{domain.Ended, domain.Failed}[i%2]
			if _, err := store.Transition(t.Context(), id, domain.Change{From: domain.Live, To: to, Reason: domain.ReasonShutdown}); err != nil {
				t.Errorf("end %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	if n, err := store.LiveCount(t.Context(), app.Tenant); err != nil || n != 0 {
		t.Errorf("after every end the live count is %d (%v), want 0", n, err)
	}
	if _, err := creator.Create(t.Context(), app, domain.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello"}); err != nil {
		t.Errorf("a create once all ended: %v", err)
	}
}

// oneProject is a registry of one project and one persona.
type oneProject struct{ registry.Store }

func (oneProject) Project(_ context.Context, _, name string) (registry.Project, error) {
	return registry.Project{Name: name}, nil
}

func (oneProject) Persona(_ context.Context, _, slug string) (registry.Persona, error) {
	return registry.Persona{Slug: slug, Name: slug, Active: true}, nil
}

// readyOnStart is the jobs queue and the sandbox at once: a queued start
// makes its session ready.
type readyOnStart struct{ store *dynamo.Sessions }

func (p readyOnStart) Publish(ctx context.Context, m jobqueue.Message, _ time.Duration) error {
	if m.Type != jobqueue.SessionStart {
		return nil
	}
	// As the worker would, the start is tried again: 200 creates at once
	// on a loaded machine can find DynamoDB Local slow to answer one. A
	// conflict is a start that happened (an attempt whose answer was lost
	// made the session ready), taken as done, as the worker takes it.
	var err error
	for range 3 {
		_, err = p.store.Transition(ctx, m.SessionID, domain.Change{From: []domain.State{domain.Provisioning}, To: domain.Ready,
			Generation: m.Generation, Set: domain.Fields{ReadyAt: time.Now(), HeartbeatAt: time.Now()}})
		if err == nil || errors.Is(err, domain.ErrConflict) {
			return nil
		}
	}
	return err
}
