package fargate_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
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
	// defs are the task definitions by family, each revision's body
	// (revision n at n-1).
	defs map[string][]map[string]any
}

type task struct {
	run     map[string]any // the RunTask request
	desired string
}

func newFakeECS() *fakeECS {
	f := &fakeECS{requests: map[string][]map[string]any{}, tasks: map[string]*task{}, byToken: map[string]string{}, defs: map[string][]map[string]any{}}
	f.defs["ra-dev-sandbox"] = make([]map[string]any, 2) // revisions 1 and 2: gone
	f.register(sandboxDefinition(platformImage))
	return f
}

const platformImage = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ra-dev-sandbox:latest"

// sandboxDefinition is the stack's sandbox task definition, running image.
func sandboxDefinition(image string) map[string]any {
	return map[string]any{
		"family": "ra-dev-sandbox", "taskRoleArn": "arn:aws:iam::123456789012:role/task", "executionRoleArn": "arn:aws:iam::123456789012:role/exec",
		"networkMode": "awsvpc", "requiresCompatibilities": []any{"FARGATE"}, "cpu": "1024", "memory": "2048",
		"runtimePlatform": map[string]any{"cpuArchitecture": "ARM64", "operatingSystemFamily": "LINUX"},
		"containerDefinitions": []any{map[string]any{
			"name": "agent", "image": image, "user": "0", "essential": true,
			"environment":      []any{map[string]any{"name": "RA_LLM_PROVIDER", "value": "anthropic"}, map[string]any{"name": "RA_TOOL_USER", "value": "agent"}},
			"logConfiguration": map[string]any{"logDriver": "awslogs", "options": map[string]any{"awslogs-group": "/ra/dev/sandboxes"}},
		}},
	}
}

// register adds a revision of its family and returns it as ECS describes
// it; f.mu is held, or f is not yet shared.
func (f *fakeECS) register(body map[string]any) map[string]any {
	family := body["family"].(string)
	def := map[string]any{}
	for k, v := range body {
		def[k] = v
	}
	def["revision"] = len(f.defs[family]) + 1
	def["taskDefinitionArn"] = fmt.Sprintf("arn:aws:ecs:us-east-1:123456789012:task-definition/%s:%d", family, len(f.defs[family])+1)
	def["status"] = "ACTIVE"
	f.defs[family] = append(f.defs[family], def)
	return def
}

// definition finds a task definition by family (its latest revision),
// family:revision or ARN.
func (f *fakeECS) definition(name string) map[string]any {
	name = name[strings.LastIndex(name, "/")+1:]
	family, rev, hasRev := strings.Cut(name, ":")
	revs := f.defs[family]
	if !hasRev {
		if len(revs) == 0 {
			return nil
		}
		return revs[len(revs)-1]
	}
	n, err := strconv.Atoi(rev)
	if err != nil || n < 1 || n > len(revs) {
		return nil
	}
	return revs[n-1]
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
	case "DescribeTaskDefinition":
		def := f.definition(body["taskDefinition"].(string))
		if def == nil {
			reply(http.StatusBadRequest, map[string]any{"__type": "ClientException", "message": "Unable to describe task definition."})
			return
		}
		reply(http.StatusOK, map[string]any{"taskDefinition": def})
	case "RegisterTaskDefinition":
		reply(http.StatusOK, map[string]any{"taskDefinition": f.register(body)})
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
	return launcherOf(t, fake, "ra-dev-sandbox:3"), fake
}

// launcherOf returns a launcher of fake's task definition taskDef: a
// function's launcher, which another one's cache does not help.
func launcherOf(t *testing.T, fake *fakeECS, taskDef string) *fargate.Launcher {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := ecs.New(ecs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	l, err := fargate.New(client, fargate.Options{
		Cluster: "ra-dev", TaskDefinition: taskDef, Container: "agent",
		Subnets: []string{"subnet-1", "subnet-2"}, SecurityGroups: []string{"sg-1"}, CPU: "1024", Memory: "2048",
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLauncherContract(t *testing.T) {
	t.Parallel()
	launchtest.Run(t, func(t *testing.T) launchtest.Harness {
		l, fake := newLauncher(t)
		// The sandbox's environment as the contract knows it: the spec's,
		// without where envd listens, which every task is told alike
		// (TestLaunchBuildsRunTask).
		identity := func(t *testing.T, ref string) map[string]string {
			t.Helper()
			env := fake.env(t, ref)
			delete(env, "RA_ENVD_LISTEN")
			return env
		}
		return launchtest.Harness{Launcher: l, Up: identity, Running: fake.running}
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
	// envd serves the sandbox proxy on its port of the task's address.
	if env["RA_ENVD_LISTEN"] != ":49983" {
		t.Errorf("RA_ENVD_LISTEN = %q", env["RA_ENVD_LISTEN"])
	}
	// The overrides are what DescribeTasks and CloudTrail show: a one-time
	// code, never a sandbox token.
	if _, ok := env["SANDBOX_MCP_AUTH_TOKEN"]; ok {
		t.Errorf("the RunTask overrides carry a sandbox token: %v", env)
	}
}

// A sandbox cut off from the network runs in the isolated security group,
// told its egress proxy; without one configured its launch fails (closed).
func TestIsolatedLaunch(t *testing.T) {
	t.Parallel()
	l, _ := newLauncher(t)
	if _, err := l.Launch(t.Context(), launch.Spec{SessionID: "s", Generation: 1, Isolated: true}); !errors.Is(err, launch.ErrIsolationUnavailable) || !strings.Contains(err.Error(), "no egress proxy") {
		t.Fatalf("an isolated launch without a proxy: %v", err)
	}
	fake := newFakeECS()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := ecs.New(ecs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	iso, err := fargate.New(client, fargate.Options{Cluster: "ra-dev", TaskDefinition: "ra-dev-sandbox:3", Container: "agent",
		Subnets: []string{"subnet-1"}, SecurityGroups: []string{"sg-open"}, IsolatedSecurityGroups: []string{"sg-isolated"}, EgressProxyURL: "http://proxy.internal:3128"})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := iso.Launch(t.Context(), launch.Spec{SessionID: "s", Generation: 1, Isolated: true})
	if err != nil {
		t.Fatal(err)
	}
	net := fake.requests["RunTask"][0]["networkConfiguration"].(map[string]any)["awsvpcConfiguration"].(map[string]any)
	if groups := net["securityGroups"].([]any); len(groups) != 1 || groups[0] != "sg-isolated" {
		t.Errorf("security groups %v", groups)
	}
	env := fake.env(t, ref)
	for _, name := range sandboxwire.ProxyVariables {
		if env[name] != "http://proxy.internal:3128" {
			t.Errorf("%s = %q", name, env[name])
		}
	}
	open, err := iso.Launch(t.Context(), launch.Spec{SessionID: "o", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if env := fake.env(t, open); env["HTTPS_PROXY"] != "" {
		t.Errorf("an open sandbox told a proxy: %v", env)
	}
	if groups := fake.requests["RunTask"][1]["networkConfiguration"].(map[string]any)["awsvpcConfiguration"].(map[string]any)["securityGroups"].([]any); groups[0] != "sg-open" {
		t.Errorf("an open sandbox's groups: %v", groups)
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

// TestBaseImageRunsItsOwnTaskDefinition: a sandbox of a type with a
// base_image runs a task definition of that image, registered from the
// sandbox's by the first launch that needs it: the agent and the platform's
// certificates copied from the platform's image by a first container, the
// base image running the agent from there, as the numeric tool user, with
// the sandbox's roles, size and logs. Later launches, and other launchers
// (other functions), reuse it; a new platform image registers it again.
func TestBaseImageRunsItsOwnTaskDefinition(t *testing.T) {
	t.Parallel()
	const image = "public.ecr.aws/docker/library/node:22"
	l, fake := newLauncher(t)
	spec := launch.Spec{SessionID: "s-1", Generation: 1, GatewayURL: "https://gw", BootstrapCode: "rbc_x", Image: image}
	if _, err := l.Launch(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	family := fargate.ImageFamily("ra-dev-sandbox", image)
	if !strings.HasPrefix(family, "ra-dev-sandbox-img-") || family == fargate.ImageFamily("ra-dev-sandbox", image+"x") {
		t.Fatalf("family %s", family)
	}
	fake.mu.Lock()
	registered := fake.requests["RegisterTaskDefinition"]
	run := fake.requests["RunTask"][0]
	fake.mu.Unlock()
	if len(registered) != 1 {
		t.Fatalf("%d registrations, want 1", len(registered))
	}
	def := registered[0]
	arn := "arn:aws:ecs:us-east-1:123456789012:task-definition/" + family + ":1"
	if run["taskDefinition"] != arn {
		t.Errorf("RunTask ran %v, want %s", run["taskDefinition"], arn)
	}
	for k, want := range map[string]any{"family": family, "taskRoleArn": "arn:aws:iam::123456789012:role/task", "executionRoleArn": "arn:aws:iam::123456789012:role/exec",
		"networkMode": "awsvpc", "cpu": "1024", "memory": "2048", "requiresCompatibilities": []any{"FARGATE"},
		"runtimePlatform": map[string]any{"cpuArchitecture": "ARM64", "operatingSystemFamily": "LINUX"},
		"volumes":         []any{map[string]any{"name": "ra-agent"}}} {
		if !reflect.DeepEqual(def[k], want) {
			t.Errorf("registered %s = %v, want %v", k, def[k], want)
		}
	}
	containers := def["containerDefinitions"].([]any)
	if len(containers) != 2 {
		t.Fatalf("containers: %v", containers)
	}
	install, agent := containers[0].(map[string]any), containers[1].(map[string]any)
	if install["name"] != fargate.InstallContainer || install["image"] != platformImage || install["essential"] != false ||
		!strings.Contains(fmt.Sprint(install["command"]), "/usr/local/bin/agent") || !reflect.DeepEqual(install["mountPoints"], []any{map[string]any{"sourceVolume": "ra-agent", "containerPath": "/ra-agent"}}) {
		t.Errorf("install container: %v", install)
	}
	env := map[string]string{}
	for _, kv := range agent["environment"].([]any) {
		m := kv.(map[string]any)
		env[m["name"].(string)] = m["value"].(string)
	}
	want := map[string]string{"RA_LLM_PROVIDER": "anthropic", "RA_TOOL_USER": fargate.ToolUserID, "SSL_CERT_FILE": "/ra-agent/ca-certificates.crt", "RA_WORKSPACE": "/workspace"}
	if agent["name"] != "agent" || agent["image"] != image || agent["user"] != "0" || !reflect.DeepEqual(agent["entryPoint"], []any{"/ra-agent/agent"}) ||
		!reflect.DeepEqual(agent["command"], []any{"sandbox"}) || !reflect.DeepEqual(env, want) || agent["logConfiguration"] == nil ||
		!reflect.DeepEqual(agent["dependsOn"], []any{map[string]any{"containerName": fargate.InstallContainer, "condition": "SUCCESS"}}) ||
		!reflect.DeepEqual(agent["mountPoints"], []any{map[string]any{"sourceVolume": "ra-agent", "containerPath": "/ra-agent", "readOnly": true}}) {
		t.Errorf("agent container: %v (environment %v)", agent, env)
	}
	if got := fake.env(t, mustLaunch(t, l, launch.Spec{SessionID: "s-2", Generation: 1, BootstrapCode: "rbc_y", Image: image})); got[launch.EnvBaseImage] != image {
		t.Errorf("the task's environment says base image %q", got[launch.EnvBaseImage])
	}
	// Another launcher, from the same platform image: ECS has it.
	mustLaunch(t, launcherOf(t, fake, "ra-dev-sandbox:3"), launch.Spec{SessionID: "s-3", Generation: 1, Image: image})
	// Without a base image: the sandbox's own definition.
	plain := mustLaunch(t, l, launch.Spec{SessionID: "s-4", Generation: 1})
	fake.mu.Lock()
	if n := len(fake.requests["RegisterTaskDefinition"]); n != 1 {
		t.Errorf("%d registrations after three launches of one image, want 1", n)
	}
	if got := fake.tasks[plain].run["taskDefinition"]; got != "ra-dev-sandbox:3" {
		t.Errorf("a sandbox without base image ran %v", got)
	}
	// A deploy with a new platform image: its launchers register the base
	// image's definition again, with the new agent.
	fake.register(sandboxDefinition(platformImage + "-v2"))
	fake.mu.Unlock()
	ref := mustLaunch(t, launcherOf(t, fake, "ra-dev-sandbox:4"), launch.Spec{SessionID: "s-5", Generation: 1, Image: image})
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if n := len(fake.requests["RegisterTaskDefinition"]); n != 2 {
		t.Fatalf("%d registrations after a new platform image, want 2", n)
	}
	if got := fake.tasks[ref].run["taskDefinition"]; got != "arn:aws:ecs:us-east-1:123456789012:task-definition/"+family+":2" {
		t.Errorf("after a new platform image RunTask ran %v", got)
	}
	if img := fake.defs[family][1]["containerDefinitions"].([]any)[0].(map[string]any)["image"]; img != platformImage+"-v2" {
		t.Errorf("the new definition installs the agent from %v", img)
	}
}

func mustLaunch(t *testing.T, l *fargate.Launcher, spec launch.Spec) string {
	t.Helper()
	ref, err := l.Launch(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
