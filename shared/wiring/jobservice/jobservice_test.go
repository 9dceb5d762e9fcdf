package jobservice_test

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/eventbus"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/jobevents/queuepub"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/jobservice"
)

// The job events go to EventBridge where there is one (AWS, LocalStack, an
// explicit EventBridge endpoint) and onto the orchestrator queue on the
// bundled emulators. Not parallel: it sets the process's environment.
func TestJobEventsChoosesEventBridgeWhereThereIsOne(t *testing.T) {
	tests := []struct {
		name        string
		vars        map[string]string
		eventBridge bool
	}{
		{"AWS", nil, true},
		{"LocalStack", map[string]string{"AWS_ENDPOINT_URL": "http://localhost:4566"}, true},
		{"bundled emulators", map[string]string{
			"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1",
		}, false},
		{"emulators and an EventBridge", map[string]string{
			"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_EVENTBRIDGE": "http://127.0.0.1:2",
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_EVENTBRIDGE"} {
				t.Setenv(k, tt.vars[k])
			}
			if got := jobservice.EventsOnEventBridge(); got != tt.eventBridge {
				t.Fatalf("EventsOnEventBridge = %v, want %v", got, tt.eventBridge)
			}
			e := env(t)
			if !tt.eventBridge {
				// The queue publisher sends to the queue the configuration
				// names, and otherwise looks it up, where nothing listens.
				if pub, err := jobservice.Events(t.Context(), e); err != nil || !isQueuePub(pub) {
					t.Fatalf("Events = %T, %v; want the orchestrator queue's publisher", pub, err)
				}
				e = env(t)
				e.Config.OrchestratorQueue = ""
				if pub, err := jobservice.Events(t.Context(), e); err == nil || !strings.Contains(err.Error(), "ra-dev-orchestrator") {
					t.Fatalf("Events = %T, %v; want the orchestrator queue's lookup to fail", pub, err)
				}
				return
			}
			pub, err := jobservice.Events(t.Context(), e)
			bus, ok := pub.(*eventbus.Bus)
			if err != nil || !ok || bus.Name() != "ra-dev-jobs" {
				t.Fatalf("Events = %T, %v; want the bus ra-dev-jobs", pub, err)
			}
			if again, _ := jobservice.Events(t.Context(), e); again != pub {
				t.Error("built twice")
			}
		})
	}
}

func isQueuePub(p jobevents.Publisher) bool {
	_, ok := p.(*queuepub.Publisher)
	return ok
}

// env is an Env whose clients point at an address nothing listens on, with
// the orchestrator queue's URL configured.
func env(t *testing.T) *wiring.Env {
	t.Helper()
	cfg := config.PlatformDefaults()
	cfg.OrchestratorQueue = "http://127.0.0.1:1/q/orchestrator"
	awsCfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: aws.AnonymousCredentials{}}
	e, err := wiring.New(cfg, awsCfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}
