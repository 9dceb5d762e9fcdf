package fargate_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/launch/fargate"
)

// fakeECS speaks the ECS JSON 1.1 wire format for RunTask and StopTask and records
// each request body by operation.
type fakeECS struct {
	mu       sync.Mutex
	requests map[string][]map[string]any
	runReply string
}

func (f *fakeECS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonEC2ContainerServiceV20141113.")
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests[op] = append(f.requests[op], body)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch op {
	case "RunTask":
		_, _ = w.Write([]byte(f.runReply))
	case "StopTask":
		if body["task"] == "arn:gone" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"InvalidParameterException","message":"The referenced task was not found."}`))
			return
		}
		_, _ = w.Write([]byte(`{"task":{"taskArn":"` + body["task"].(string) + `","desiredStatus":"STOPPED"}}`))
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

func newLauncher(t *testing.T, runReply string) (*fargate.Launcher, *fakeECS) {
	t.Helper()
	fake := &fakeECS{requests: map[string][]map[string]any{}, runReply: runReply}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	l, err := fargate.New(client, fargate.Options{
		Cluster: "ra-dev", TaskDefinition: "ra-dev-sandbox:3", Container: "agent",
		Subnets: []string{"subnet-1", "subnet-2"}, SecurityGroups: []string{"sg-1"}, CPU: "1024", Memory: "2048",
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, fake
}

func TestLaunchBuildsRunTask(t *testing.T) {
	t.Parallel()
	l, fake := newLauncher(t, `{"tasks":[{"taskArn":"arn:aws:ecs:us-east-1:1:task/ra-dev/abc"}],"failures":[]}`)
	spec := launch.Spec{SessionID: "6071cda9-7ba1-431a-9ad4-e711d5ed0a30", Generation: 2, GatewayURL: "https://api.example.com", SandboxToken: "rsb_x", TmuxSessionName: "ra-6071cda9"}
	ref, err := l.Launch(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if ref != "arn:aws:ecs:us-east-1:1:task/ra-dev/abc" {
		t.Errorf("ref = %q", ref)
	}
	req := fake.requests["RunTask"][0]
	want := map[string]any{
		"cluster": "ra-dev", "taskDefinition": "ra-dev-sandbox:3", "launchType": "FARGATE", "count": float64(1),
		"clientToken": spec.SessionID + "-2", "startedBy": spec.SessionID, "group": "ra-gen-2",
	}
	for k, v := range want {
		if req[k] != v {
			t.Errorf("RunTask %s = %v, want %v", k, req[k], v)
		}
	}
	net := req["networkConfiguration"].(map[string]any)["awsvpcConfiguration"].(map[string]any)
	if net["assignPublicIp"] != "DISABLED" || len(net["subnets"].([]any)) != 2 || net["securityGroups"].([]any)[0] != "sg-1" {
		t.Errorf("network %v", net)
	}
	overrides := req["overrides"].(map[string]any)
	if overrides["cpu"] != "1024" || overrides["memory"] != "2048" {
		t.Errorf("size overrides %v", overrides)
	}
	container := overrides["containerOverrides"].([]any)[0].(map[string]any)
	env := map[string]string{}
	for _, kv := range container["environment"].([]any) {
		m := kv.(map[string]any)
		env[m["name"].(string)] = m["value"].(string)
	}
	if container["name"] != "agent" || env["RA_SESSION_ID"] != spec.SessionID || env["RA_GENERATION"] != "2" ||
		env["RA_GATEWAY_URL"] != spec.GatewayURL || env["RA_SANDBOX_TOKEN"] != "rsb_x" || env["RA_TMUX_SESSION_NAME"] != "ra-6071cda9" {
		t.Errorf("container override %v", container)
	}
}

func TestLaunchReportsFailures(t *testing.T) {
	t.Parallel()
	l, _ := newLauncher(t, `{"tasks":[],"failures":[{"reason":"RESOURCE:ENI","detail":"no capacity"}]}`)
	_, err := l.Launch(t.Context(), launch.Spec{SessionID: "s", Generation: 1})
	if err == nil || !strings.Contains(err.Error(), "RESOURCE:ENI") {
		t.Errorf("err = %v", err)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	l, fake := newLauncher(t, `{}`)
	if err := l.Stop(t.Context(), "arn:task/1", time.Second); err != nil {
		t.Fatal(err)
	}
	if req := fake.requests["StopTask"][0]; req["cluster"] != "ra-dev" || req["task"] != "arn:task/1" || req["reason"] == "" {
		t.Errorf("StopTask %v", req)
	}
	if err := l.Stop(t.Context(), "arn:gone", time.Second); err != nil {
		t.Errorf("stopping a gone task: %v", err)
	}
}
