// Package poolservice builds the warm pool's service and the agent types'
// service for an Env, once each: the agent types count their idle
// sandboxes with the pool, and the pool launches sandboxes of the types.
// The functions that resolve agent types (create, agenttypes) or run the
// pool (sandbox, jobworker) use them.
package poolservice

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/guardrails"
	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/pool"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// key names what this package keeps in an Env (wiring.Once).
type key int

const (
	agentTypesKey key = iota
	poolKey
)

// AgentTypes is the agent type service over the registry, with the
// configuration's workspace defaults.
func AgentTypes(e *wiring.Env) *agenttype.Service {
	s, _ := wiring.Once(e, agentTypesKey, func() (*agenttype.Service, error) {
		d := e.Config.WorkspaceDefaults
		return agenttype.New(agenttype.Options{
			Registry: e.Registry(),
			Defaults: registry.ResourceLimits{CPU: d.CPU, Memory: d.Memory, Disk: d.Disk},
			// A fixed repository may be served over plain http or git by them.
			GitInsecureHosts: e.Config.GitInsecureHosts,
			Pool:             counter{e},
		}), nil
	})
	return s
}

// Pool is the warm pool over the registry and sessions tables: its
// sandboxes are launched with the Env's Launcher (jobworker's), told of
// their claims over the push channel, and retired when the guardrails, the
// sandbox image or their type's configuration change. It keeps the pools
// of the agent types and of the job profiles that ask for one.
func Pool(e *wiring.Env) *pool.Service {
	s, _ := wiring.Once(e, poolKey, func() (*pool.Service, error) {
		profiles := dynamo.NewJobs(e.DynamoDB(), e.Resources.Jobs.Name, e.Resources.Registry.Name)
		return pool.New(pool.Options{
			Store:    e.PoolStore(),
			Types:    pool.Join(AgentTypes(e), job.PoolTypes{Profiles: profiles}),
			Launcher: e.Launcher,
			Notifier: e.Notifier(),
			Guardrails: func(ctx context.Context) (string, error) {
				doc, err := guardrails.Load(ctx, e.Guardrails())
				return doc.Hash, err
			},
			Image:           cmp.Or(e.SandboxImage, e.Config.Fargate.TaskDefinition),
			GatewayURL:      e.Config.GatewayURL,
			ModelGatewayURL: e.Config.Model.GatewayURL,
			PushURL:         e.Config.Push.URL,
			RefillOnClaim:   !e.NoPoolRefillOnClaim,
			// A fixed repository is cloned by the pool's sandboxes.
			GitInsecureHosts: e.Config.GitInsecureHosts,
			Metric:           metric(e.Log),
			Log:              e.Log,
		}), nil
	})
	return s
}

// metric writes each start's pool outcome as a CloudWatch embedded
// metric (namespace RemoteAgents, metric WarmPoolClaims or WarmPoolMisses,
// by agent type): Lambda's logs turn the line into the metric.
func metric(log *slog.Logger) func(context.Context, string, bool) {
	return func(ctx context.Context, agentType string, warm bool) {
		name := "WarmPoolMisses"
		if warm {
			name = "WarmPoolClaims"
		}
		log.InfoContext(ctx, "warm pool "+name,
			slog.Any("_aws", map[string]any{
				"Timestamp": time.Now().UnixMilli(),
				"CloudWatchMetrics": []map[string]any{{
					"Namespace":  "RemoteAgents",
					"Dimensions": [][]string{{"AgentType"}},
					"Metrics":    []map[string]string{{"Name": name, "Unit": "Count"}},
				}},
			}),
			slog.String("AgentType", agentType), slog.Int(name, 1))
	}
}

// counter counts with the Env's pool, built when first counted (the pool
// is built over the agent types).
type counter struct{ e *wiring.Env }

func (c counter) Count(ctx context.Context, t registry.AgentType) (idle, starting int, err error) {
	return Pool(c.e).Count(ctx, t)
}
