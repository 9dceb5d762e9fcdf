// Package fargate launches sandboxes as ECS tasks on Fargate: RunTask with the
// session's identity in the container's environment and a client token of session
// id and generation (so a repeated launch starts nothing new), StopTask to stop.
//
// Tasks carry the session id as startedBy and "ra-gen-<generation>" as their group,
// which is how ECS task-state events are traced back to their session.
package fargate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/jobqueue"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// API is the part of the ECS client the launcher calls; *ecs.Client has it.
type API interface {
	RunTask(ctx context.Context, in *ecs.RunTaskInput, opts ...func(*ecs.Options)) (*ecs.RunTaskOutput, error)
	StopTask(ctx context.Context, in *ecs.StopTaskInput, opts ...func(*ecs.Options)) (*ecs.StopTaskOutput, error)
	DescribeTaskDefinition(ctx context.Context, in *ecs.DescribeTaskDefinitionInput, opts ...func(*ecs.Options)) (*ecs.DescribeTaskDefinitionOutput, error)
	RegisterTaskDefinition(ctx context.Context, in *ecs.RegisterTaskDefinitionInput, opts ...func(*ecs.Options)) (*ecs.RegisterTaskDefinitionOutput, error)
}

var (
	_ API             = (*ecs.Client)(nil)
	_ launch.Launcher = (*Launcher)(nil)
)

// GroupPrefix starts the task group that carries the generation.
const GroupPrefix = jobqueue.ECSGroupPrefix

// Options say where and how tasks run.
type Options struct {
	Cluster        string
	TaskDefinition string
	// Container is the name of the agent container in the task definition.
	Container      string
	Subnets        []string
	SecurityGroups []string
	// IsolatedSecurityGroups are those of tasks cut off from the network
	// (launch.Spec.Isolated), which reach EgressProxyURL only: their
	// HTTP(S)_PROXY. Without both, an isolated launch fails.
	IsolatedSecurityGroups []string
	EgressProxyURL         string
	// AssignPublicIP gives tasks a public IP (subnets without a NAT gateway).
	AssignPublicIP bool
	// CPU and Memory override the task definition's size ("1024", "2048"); "" keeps it.
	CPU    string
	Memory string
	// CapacityProvider is where tasks run first: FARGATE (on-demand) or
	// FARGATE_SPOT, the other one being the fallback (launch.Spec.Fallback);
	// "" runs them with the FARGATE launch type, and the fallback is a
	// second RunTask of the same.
	CapacityProvider string
}

// The Fargate capacity providers: on-demand and Spot, each the other's
// fallback.
const (
	CapacityOnDemand = "FARGATE"
	CapacitySpot     = "FARGATE_SPOT"
)

// capacity is the capacity provider of a launch ("" for the launch type).
func (o Options) capacity(fallback bool) string {
	switch {
	case o.CapacityProvider == "" || !fallback:
		return o.CapacityProvider
	case o.CapacityProvider == CapacitySpot:
		return CapacityOnDemand
	default:
		return CapacitySpot
	}
}

// FromConfig returns a launcher of tasks where the configuration says, with an
// ECS client of cfg (wiring.WithLauncher).
func FromConfig(cfg aws.Config, f config.Fargate) (launch.Launcher, error) {
	l, err := New(ecs.NewFromConfig(cfg), Options{
		Cluster: f.Cluster, TaskDefinition: f.TaskDefinition, Container: f.Container, Subnets: f.Subnets,
		SecurityGroups: f.SecurityGroups, AssignPublicIP: f.AssignPublicIP, CPU: f.CPU, Memory: f.Memory,
		IsolatedSecurityGroups: f.IsolatedSecurityGroups, EgressProxyURL: f.EgressProxyURL,
		CapacityProvider: f.CapacityProvider,
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Launcher runs sandboxes as Fargate tasks.
type Launcher struct {
	api API
	o   Options

	mu     sync.Mutex
	images map[string]string // base image → its task definition's ARN
}

// New returns a Fargate launcher.
func New(api API, o Options) (*Launcher, error) {
	if o.Cluster == "" || o.TaskDefinition == "" || o.Container == "" || len(o.Subnets) == 0 {
		return nil, errors.New("fargate launcher: cluster, task definition, container and subnets are required")
	}
	if o.CapacityProvider != "" && o.CapacityProvider != CapacityOnDemand && o.CapacityProvider != CapacitySpot {
		return nil, fmt.Errorf("fargate launcher: capacity provider %q: want %s or %s", o.CapacityProvider, CapacityOnDemand, CapacitySpot)
	}
	return &Launcher{api: api, o: o, images: map[string]string{}}, nil
}

// Launch runs the sandbox task of spec.
func (l *Launcher) Launch(ctx context.Context, spec launch.Spec) (string, error) {
	env := make([]types.KeyValuePair, 0, len(spec.Env())+1)
	for k, v := range spec.Env() {
		env = append(env, types.KeyValuePair{Name: aws.String(k), Value: aws.String(v)})
	}
	// envd on its port of the task's address, for the sandbox proxy (the
	// only one the sandboxes' security groups let reach it).
	env = append(env, types.KeyValuePair{Name: aws.String(sandboxwire.EnvEnvdListen), Value: aws.String(":" + strconv.Itoa(sandboxwire.EnvdPort))})
	assign := types.AssignPublicIpDisabled
	if l.o.AssignPublicIP {
		assign = types.AssignPublicIpEnabled
	}
	groups := l.o.SecurityGroups
	if spec.Isolated {
		if len(l.o.IsolatedSecurityGroups) == 0 || l.o.EgressProxyURL == "" {
			return "", fmt.Errorf("run task for %s: %w: its egress policy cuts it off from the network, and this stack has no egress proxy (RA_ECS_ISOLATED_SECURITY_GROUPS, RA_EGRESS_PROXY_URL)", spec.SessionID, launch.ErrIsolationUnavailable)
		}
		groups = l.o.IsolatedSecurityGroups
		for _, kv := range sandboxwire.ProxyEnv(l.o.EgressProxyURL) {
			name, v, _ := strings.Cut(kv, "=")
			env = append(env, types.KeyValuePair{Name: aws.String(name), Value: aws.String(v)})
		}
	}
	taskDef, err := l.taskDefinition(ctx, spec.Image)
	if err != nil {
		return "", fmt.Errorf("run task for %s: %w", spec.SessionID, err)
	}
	in := &ecs.RunTaskInput{
		Cluster:        &l.o.Cluster,
		TaskDefinition: &taskDef,
		LaunchType:     types.LaunchTypeFargate,
		Count:          aws.Int32(1),
		ClientToken:    aws.String(spec.SessionID + "-" + strconv.Itoa(spec.Generation)),
		StartedBy:      aws.String(spec.SessionID),
		Group:          aws.String(GroupPrefix + strconv.Itoa(spec.Generation)),
		NetworkConfiguration: &types.NetworkConfiguration{AwsvpcConfiguration: &types.AwsVpcConfiguration{
			Subnets:        l.o.Subnets,
			SecurityGroups: groups,
			AssignPublicIp: assign,
		}},
		Overrides: &types.TaskOverride{ContainerOverrides: []types.ContainerOverride{{
			Name:        &l.o.Container,
			Environment: env,
		}}},
		Tags: []types.Tag{
			{Key: aws.String("ra:session-id"), Value: aws.String(spec.SessionID)},
			{Key: aws.String("ra:generation"), Value: aws.String(strconv.Itoa(spec.Generation))},
		},
		EnableECSManagedTags: true,
	}
	switch {
	case spec.Bare:
		in.ClientToken = aws.String(spec.SessionID + "-" + strconv.Itoa(spec.Generation) + "-bare")
	case spec.Fallback:
		// A new request, not a replay of the one that failed.
		in.ClientToken = aws.String(spec.SessionID + "-" + strconv.Itoa(spec.Generation) + "-fallback")
	}
	if provider := l.o.capacity(spec.Fallback); provider != "" {
		in.LaunchType = ""
		in.CapacityProviderStrategy = []types.CapacityProviderStrategyItem{{CapacityProvider: aws.String(provider), Weight: 1}}
	}
	if err := l.size(in.Overrides, spec.Size); err != nil {
		return "", fmt.Errorf("run task for %s: %w", spec.SessionID, err)
	}
	out, err := l.api.RunTask(ctx, in)
	if err != nil {
		return "", fmt.Errorf("run task for %s: %w", spec.SessionID, err)
	}
	if len(out.Tasks) == 0 {
		reasons := make([]string, 0, len(out.Failures))
		for _, f := range out.Failures {
			reasons = append(reasons, aws.ToString(f.Reason)+" "+aws.ToString(f.Detail))
		}
		return "", fmt.Errorf("run task for %s: no task started: %s", spec.SessionID, strings.Join(reasons, "; "))
	}
	return aws.ToString(out.Tasks[0].TaskArn), nil
}

// size sets the task's CPU and memory (task-level overrides: the agent
// container has no size of its own, so it gets the task's) and its
// ephemeral storage: the spec's size, else the launcher's (Options.CPU and
// Memory), else the task definition's. CPU and memory must be a pair Fargate
// has (tasksize); disk beyond the 20 GiB every task has is ephemeral storage.
func (l *Launcher) size(o *types.TaskOverride, s tasksize.Size) error {
	cpu, memory := l.o.CPU, l.o.Memory
	if s.CPUUnits > 0 {
		cpu = strconv.Itoa(s.CPUUnits)
	}
	if s.MemoryMiB > 0 {
		memory = strconv.Itoa(s.MemoryMiB)
	}
	if s.CPUUnits > 0 || s.MemoryMiB > 0 {
		units, errCPU := strconv.Atoi(cpu)
		mib, errMem := strconv.Atoi(memory)
		if errCPU != nil || errMem != nil {
			return fmt.Errorf("task size: cpu %q and memory %q must both be set", cpu, memory)
		}
		if err := tasksize.Check(units, mib); err != nil {
			return fmt.Errorf("task size: %w", err)
		}
	}
	if cpu != "" {
		o.Cpu = aws.String(cpu)
	}
	if memory != "" {
		o.Memory = aws.String(memory)
	}
	if s.DiskGiB > tasksize.MinDiskGiB {
		o.EphemeralStorage = &types.EphemeralStorage{SizeInGiB: int32(min(s.DiskGiB, tasksize.MaxDiskGiB))}
	}
	return nil
}

// Stop stops a task. ECS sends SIGTERM and, after the container's stopTimeout
// (set in the task definition; grace is the local launcher's), SIGKILL.
func (l *Launcher) Stop(ctx context.Context, ref string, _ time.Duration) error {
	_, err := l.api.StopTask(ctx, &ecs.StopTaskInput{
		Cluster: &l.o.Cluster,
		Task:    &ref,
		Reason:  aws.String("Remote Agents session stopped"),
	})
	var invalid *types.InvalidParameterException
	if errors.As(err, &invalid) && strings.Contains(strings.ToLower(invalid.ErrorMessage()), "task") {
		return nil // already gone
	}
	if err != nil {
		return fmt.Errorf("stop task %s: %w", ref, err)
	}
	return nil
}
