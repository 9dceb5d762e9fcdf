package resources_test

import (
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/resources"
)

func TestForPrefixesEveryName(t *testing.T) {
	t.Parallel()
	set, err := resources.For("staging")
	if err != nil {
		t.Fatal(err)
	}
	// Names are unique within a service (the jobs table and jobs queue may share one).
	names := []string{"s3:" + set.Bucket.Name}
	for _, tb := range set.Tables() {
		names = append(names, "dynamodb:"+tb.Name)
		if tb.TTLAttribute != resources.TTLAttribute {
			t.Errorf("table %s has TTL attribute %q", tb.Name, tb.TTLAttribute)
		}
	}
	for _, q := range set.Queues() {
		names = append(names, "sqs:"+q.Name, "sqs:"+q.DeadLetterName)
		if q.MaxReceiveCount < 1 || q.VisibilityTimeout <= 0 || q.DeadLetterRetention < q.Retention {
			t.Errorf("queue %s: %+v", q.Name, q)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if _, name, _ := strings.Cut(n, ":"); !strings.HasPrefix(name, "ra-staging-") {
			t.Errorf("%q lacks the environment prefix", n)
		}
		if seen[n] {
			t.Errorf("%q defined twice", n)
		}
		seen[n] = true
	}
	if len(names) != 14 {
		t.Errorf("%d names, want 5 tables + 8 queues + 1 bucket", len(names))
	}
}

func TestValidateEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env string
		ok  bool
	}{
		{"dev", true},
		{"prod-eu-1", true},
		{"t0123456789", true},
		{"", false},
		{"Dev", false},
		{"1dev", false},
		{"dev_1", false},
		{"dev.1", false},
		{"../x", false},
		{strings.Repeat("a", 31), true},
		{strings.Repeat("a", 32), false},
	}
	for _, tt := range tests {
		if err := resources.ValidateEnv(tt.env); (err == nil) != tt.ok {
			t.Errorf("ValidateEnv(%q) = %v, want ok=%v", tt.env, err, tt.ok)
		}
		if _, err := resources.For(tt.env); (err == nil) != tt.ok {
			t.Errorf("For(%q) = %v, want ok=%v", tt.env, err, tt.ok)
		}
	}
}

func TestJobEventsGoToTheOrchestratorQueue(t *testing.T) {
	t.Parallel()
	set, err := resources.For("dev")
	if err != nil {
		t.Fatal(err)
	}
	want := resources.EventRule{Bus: "ra-dev-jobs", Name: "ra-dev-job-events", Source: "remote-agents.jobs", Queue: "ra-dev-orchestrator"}
	if set.JobEvents != want || set.OrchestratorQueue.Name != want.Queue || set.OrchestratorQueue.DeadLetterName != "ra-dev-orchestrator-dlq" {
		t.Errorf("job events %+v, orchestrator queue %+v", set.JobEvents, set.OrchestratorQueue)
	}
}
