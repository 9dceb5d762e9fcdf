package bootstrap_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/bootstrap"
	"github.com/remote-agents/remote-agents/shared/resources"
)

// fakeEventBridge speaks EventBridge's JSON 1.1 wire format for the calls the
// bootstrap makes, and keeps buses, rules and targets as EventBridge does.
type fakeEventBridge struct {
	mu      sync.Mutex
	buses   map[string]bool
	rules   map[string]map[string]any // by bus/name: the PutRule request
	targets map[string][]any          // by bus/name
}

func (f *fakeEventBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSEvents.")
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	reply := func(status int, v any) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(typ string) { reply(http.StatusBadRequest, map[string]any{"__type": typ, "message": typ}) }
	str := func(k string) string { s, _ := body[k].(string); return s }
	key := str("EventBusName") + "/" + str("Name")
	switch op {
	case "CreateEventBus":
		if f.buses[str("Name")] {
			fail("ResourceAlreadyExistsException")
			return
		}
		f.buses[str("Name")] = true
		reply(http.StatusOK, map[string]any{"EventBusArn": "arn:aws:events:us-east-1:000000000000:event-bus/" + str("Name")})
	case "DescribeRule":
		if _, ok := f.rules[key]; !ok {
			fail("ResourceNotFoundException")
			return
		}
		reply(http.StatusOK, map[string]any{"Name": str("Name")})
	case "PutRule":
		if !f.buses[str("EventBusName")] {
			fail("ResourceNotFoundException")
			return
		}
		f.rules[key] = body
		reply(http.StatusOK, map[string]any{"RuleArn": "arn:aws:events:us-east-1:000000000000:rule/" + key})
	case "PutTargets":
		key = str("EventBusName") + "/" + str("Rule")
		if _, ok := f.rules[key]; !ok {
			fail("ResourceNotFoundException")
			return
		}
		f.targets[key], _ = body["Targets"].([]any)
		reply(http.StatusOK, map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}})
	default:
		fail("UnknownOperationException")
	}
}

// Where there is an EventBridge (LocalStack), the bootstrap makes the jobs'
// bus and its rule forwarding the jobs' source to the orchestrator queue, once.
func TestRunMakesTheJobsBusAndItsRule(t *testing.T) {
	t.Parallel()
	fake := &fakeEventBridge{buses: map[string]bool{}, rules: map[string]map[string]any{}, targets: map[string][]any{}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	set, err := resources.For(awstest.UniqueEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	clients := bootstrap.ClientsFor(awstest.Config(t))
	clients.EventBridge = eventbridge.New(eventbridge.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})

	first, err := bootstrap.Run(t.Context(), clients, set)
	if err != nil {
		t.Fatal(err)
	}
	second, err := bootstrap.Run(t.Context(), clients, set)
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"event bus " + set.JobEvents.Bus, "event rule " + set.JobEvents.Name} {
		if !contains(first.Created, what) || !contains(second.Existing, what) || contains(second.Created, what) {
			t.Errorf("%s: created %v, then existing %v", what, first.Created, second.Existing)
		}
	}
	key := set.JobEvents.Bus + "/" + set.JobEvents.Name
	rule := fake.rules[key]
	if rule == nil || rule["EventPattern"] != `{"source":["remote-agents.jobs"]}` || rule["State"] != "ENABLED" {
		t.Errorf("rule %v", rule)
	}
	targets := fake.targets[key]
	if len(targets) != 1 || !strings.HasSuffix(targets[0].(map[string]any)["Arn"].(string), ":"+set.OrchestratorQueue.Name) {
		t.Errorf("targets %v, want the orchestrator queue", targets)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
