package fargate_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/launch/fargate"
	"github.com/remote-agents/remote-agents/shared/launch/launchtest"
	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// fakeECS speaks the ECS JSON 1.1 wire format for RunTask and StopTask, keeps the
// tasks it started as ECS does (a repeated clientToken returns the task of its
// first request), and records each request body by operation.
type fakeECS struct {
	mu       sync.Mutex
	requests map[string][]map[string]any
	tasks    map[string]*task  // by ARN
	byToken  map[string]string // clientToken to ARN
	// failures, if set, is what RunTask answers instead of starting a task.
	failures string
}

type task struct {
	run     map[string]any // the RunTask request
	desired string
}

func newFakeECS() *fakeECS {
	return &fakeECS{requests: map[string][]map[string]any{}, tasks: map[string]*task{}, byToken: map[string]string{}}
}

func (f *fakeECS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonEC2ContainerServiceV20141113.")
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[op] = append(f.requests[op], body)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	reply := func(status int, v any) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch op {
	case "RunTask":
		if f.failures != "" {
			_, _ = w.Write([]byte(f.failures))
			return
		}
		token, _ := body["clientToken"].(string)
		arn, ok := f.byToken[token]
		if !ok || token == "" {
			arn = "arn:aws:ecs:us-east-1:123456789012:task/" + body["cluster"].(string) + "/" + newTaskID()
			f.tasks[arn] = &task{run: body, desired: "RUNNING"}
			if token != "" {
				f.byToken[token] = arn
			}
		}
		reply(http.StatusOK, map[string]any{"tasks": []any{f.describe(arn)}, "failures": []any{}})
	case "StopTask":
		arn, _ := body["task"].(string)
		t, ok := f.tasks[arn]
		if !ok {
			reply(http.StatusBadRequest, map[string]any{"__type": "InvalidParameterException", "message": "The referenced task was not found."})
			return
		}
		t.desired = "STOPPED"
		reply(http.StatusOK, map[string]any{"task": f.describe(arn)})
	default:
		reply(http.StatusBadRequest, map[string]any{"__type": "InvalidParameterException", "message": "Unsupported operation " + op})
	}
}

func (f *fakeECS) describe(arn string) map[string]any {
	t := f.tasks[arn]
	return map[string]any{
		"taskArn": arn, "lastStatus": "PROVISIONING", "desiredStatus": t.desired,
		"startedBy": t.run["startedBy"], "group": t.run["group"], "overrides": t.run["overrides"],
	}
}

// env returns the environment the task ref's agent container was started with.
func (f *fakeECS) env(t *testing.T, ref string) map[string]string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	tk, ok := f.tasks[ref]
	if !ok {
		t.Fatalf("no task %s", ref)
	}
	env := map[string]string{}
	overrides, _ := tk.run["overrides"].(map[string]any)
	containers, _ := overrides["containerOverrides"].([]any)
	for _, c := range containers {
		c, _ := c.(map[string]any)
		if c["name"] != "agent" {
			continue
		}
		vars, _ := c["environment"].([]any)
		for _, kv := range vars {
			m, _ := kv.(map[string]any)
			name, _ := m["name"].(string)
			value, _ := m["value"].(string)
			env[name] = value
		}
	}
	return env
}

// running returns the ARNs of the tasks not asked to stop.
func (f *fakeECS) running() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var arns []string
	for arn, t := range f.tasks {
		if t.desired == "RUNNING" {
			arns = append(arns, arn)
		}
	}
	return arns
}

func newTaskID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newLauncher(t *testing.T) (*fargate.Launcher, *fakeECS) {
	t.Helper()
	fake := newFakeECS()
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

func TestLauncherContract(t *testing.T) {
	t.Parallel()
	launchtest.Run(t, func(t *testing.T) launchtest.Harness {
		l, fake := newLauncher(t)
		return launchtest.Harness{Launcher: l, Up: fake.env, Running: fake.running}
	})
}

func TestLaunchBuildsRunTask(t *testing.T) {
	t.Parallel()
	l, fake := newLauncher(t)
	spec := launch.Spec{SessionID: "6071cda9-7ba1-431a-9ad4-e711d5ed0a30", Generation: 2, GatewayURL: "https://api.example.com", BootstrapCode: "rbc_x", TmuxSessionName: "ra-6071cda9"}
	ref, err := l.Launch(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref, "arn:aws:ecs:us-east-1:123456789012:task/ra-dev/") {
		t.Errorf("ref = %q, want the task ARN", ref)
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
	env := fake.env(t, ref)
	if container["name"] != "agent" || env["PROLIFERATE_SESSION_ID"] != spec.SessionID || env["RA_GENERATION"] != "2" ||
		env["PROLIFERATE_GATEWAY_URL"] != spec.GatewayURL || env["RA_BOOTSTRAP_CODE"] != "rbc_x" || env["RA_TMUX_SESSION_NAME"] != "ra-6071cda9" {
		t.Errorf("container override %v", container)
	}
	// The overrides are what DescribeTasks and CloudTrail show: a one-time
	// code, never a sandbox token.
	if _, ok := env["SANDBOX_MCP_AUTH_TOKEN"]; ok {
		t.Errorf("the RunTask overrides carry a sandbox token: %v", env)
	}
}

func TestLaunchReportsFailures(t *testing.T) {
	t.Parallel()
	l, fake := newLauncher(t)
	fake.failures = `{"tasks":[],"failures":[{"reason":"RESOURCE:ENI","detail":"no capacity"}]}`
	_, err := l.Launch(t.Context(), launch.Spec{SessionID: "s", Generation: 1})
	if err == nil || !strings.Contains(err.Error(), "RESOURCE:ENI") {
		t.Errorf("err = %v", err)
	}
}

func TestStopSendsStopTask(t *testing.T) {
	t.Parallel()
	l, fake := newLauncher(t)
	ref, err := l.Launch(t.Context(), launch.Spec{SessionID: "s", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(t.Context(), ref, time.Second); err != nil {
		t.Fatal(err)
	}
	if req := fake.requests["StopTask"][0]; req["cluster"] != "ra-dev" || req["task"] != ref || req["reason"] == "" {
		t.Errorf("StopTask %v", req)
	}
}

// TestLaunchSizesTheTask: a sandbox's size (its agent type's resource
// limits) is the task's CPU, memory and ephemeral storage in RunTask's
// overrides; a part it leaves unset is the launcher's; a size Fargate does not
// have starts nothing.
func TestLaunchSizesTheTask(t *testing.T) {
	t.Parallel()
	l, fake := newLauncher(t)
	for i, tt := range []struct {
		size             tasksize.Size
		cpu, memory      string
		ephemeralStorage any
	}{
		{tasksize.Size{CPUUnits: 2048, MemoryMiB: 8192, DiskGiB: 50}, "2048", "8192", map[string]any{"sizeInGiB": float64(50)}},
		{tasksize.Size{CPUUnits: 1024, MemoryMiB: 4096, DiskGiB: 20}, "1024", "4096", nil},
		{tasksize.Size{MemoryMiB: 8192}, "1024", "8192", nil},
		{tasksize.Size{}, "1024", "2048", nil},
	} {
		spec := launch.Spec{SessionID: fmt.Sprintf("s%d", i), Generation: 1, GatewayURL: "https://api.example.com", BootstrapCode: "rbc_x", Size: tt.size}
		if _, err := l.Launch(t.Context(), spec); err != nil {
			t.Fatal(err)
		}
		fake.mu.Lock()
		overrides := fake.requests["RunTask"][i]["overrides"].(map[string]any)
		fake.mu.Unlock()
		if overrides["cpu"] != tt.cpu || overrides["memory"] != tt.memory || !reflect.DeepEqual(overrides["ephemeralStorage"], tt.ephemeralStorage) {
			t.Errorf("%+v: overrides cpu %v memory %v storage %v, want %s %s %v", tt.size, overrides["cpu"], overrides["memory"], overrides["ephemeralStorage"], tt.cpu, tt.memory, tt.ephemeralStorage)
		}
	}
	// 0.25 vCPU cannot have 8G: nothing is asked of ECS.
	if _, err := l.Launch(t.Context(), launch.Spec{SessionID: "bad", Generation: 1, Size: tasksize.Size{CPUUnits: 256, MemoryMiB: 8192}}); err == nil || !strings.Contains(err.Error(), "0.25 vCPU takes") {
		t.Errorf("an impossible size launched: %v", err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if n := len(fake.requests["RunTask"]); n != 4 {
		t.Errorf("%d RunTask requests, want 4", n)
	}
}

// A launch runs on the configured capacity provider; its fallback on the
// other one (Spot and on-demand), as a new request (its own client token).
// Without a capacity provider, launches use the FARGATE launch type and the
// fallback is a new RunTask of the same.
func TestFallbackRunsOnTheOtherCapacityProvider(t *testing.T) {
	t.Parallel()
	fake := newFakeECS()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	if _, err := fargate.New(client, fargate.Options{Cluster: "c", TaskDefinition: "t", Container: "agent", Subnets: []string{"s"}, CapacityProvider: "EC2"}); err == nil {
		t.Error("an unknown capacity provider was accepted")
	}
	spec := launch.Spec{SessionID: "6071cda9-7ba1-431a-9ad4-e711d5ed0a30", Generation: 1}
	for i, c := range []struct{ provider, first, fallback string }{
		{fargate.CapacitySpot, fargate.CapacitySpot, fargate.CapacityOnDemand},
		{fargate.CapacityOnDemand, fargate.CapacityOnDemand, fargate.CapacitySpot},
		{"", "", ""},
	} {
		l, err := fargate.New(client, fargate.Options{Cluster: "c", TaskDefinition: "t", Container: "agent", Subnets: []string{"s"}, CapacityProvider: c.provider})
		if err != nil {
			t.Fatal(err)
		}
		spec.Generation = i + 1
		for _, fallback := range []bool{false, true} {
			spec.Fallback = fallback
			if _, err := l.Launch(t.Context(), spec); err != nil {
				t.Fatal(err)
			}
		}
		fake.mu.Lock()
		runs := fake.requests["RunTask"][2*i:]
		fake.mu.Unlock()
		for j, want := range []string{c.first, c.fallback} {
			req := runs[j]
			token := spec.SessionID + "-" + strconv.Itoa(i+1)
			if j == 1 {
				token += "-fallback"
			}
			if req["clientToken"] != token {
				t.Errorf("%q launch %d: client token %v, want %s", c.provider, j, req["clientToken"], token)
			}
			strategy, _ := req["capacityProviderStrategy"].([]any)
			switch {
			case want == "" && (req["launchType"] != "FARGATE" || strategy != nil):
				t.Errorf("%q launch %d: %v", c.provider, j, req)
			case want != "" && (req["launchType"] != nil || len(strategy) != 1 || strategy[0].(map[string]any)["capacityProvider"] != want):
				t.Errorf("%q launch %d: launch type %v, strategy %v, want %s", c.provider, j, req["launchType"], strategy, want)
			}
		}
	}
}
