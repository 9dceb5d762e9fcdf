package bootstrap_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/resources"
)

func TestMain(m *testing.M) { awstest.Main(m) }

func TestRunTwiceCreatesNothingSecondTime(t *testing.T) {
	t.Parallel()
	set, err := resources.For(awstest.UniqueEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	clients := bootstrap.ClientsFor(awstest.Config(t))

	first, err := bootstrap.Run(t.Context(), clients, set)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	// 5 tables + 5 TTLs + the events table's stream + 8 queues (4 and their
	// DLQs) + 1 bucket, and on LocalStack the jobs' bus and its rule.
	want := 20
	if clients.EventBridge != nil {
		want += 2
	}
	if got := len(first.Created); got != want {
		t.Errorf("first run created %d resources, want %d: %v", got, want, first.Created)
	}
	if len(first.Existing) != 0 {
		t.Errorf("first run found existing resources: %v", first.Existing)
	}

	second, err := bootstrap.Run(t.Context(), clients, set)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if len(second.Created) != 0 {
		t.Errorf("second run created %v, want nothing", second.Created)
	}
	if len(second.Existing) != len(first.Created) {
		t.Errorf("second run found %d existing, want %d", len(second.Existing), len(first.Created))
	}
	for name, url := range first.QueueURLs {
		if second.QueueURLs[name] != url {
			t.Errorf("queue %s: URL %q then %q", name, url, second.QueueURLs[name])
		}
	}
}
