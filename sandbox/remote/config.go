package remote

import (
	"cmp"
	"fmt"
	"path/filepath"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/agentconfig"
	"github.com/remote-agents/remote-agents/sandbox/jobmode"
	"github.com/remote-agents/remote-agents/sandbox/poolwait"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Config is the sandbox's identity, pacing and model.
type Config struct {
	SessionID string
	// PoolSandbox is the pool sandbox id of a sandbox launched into the warm
	// pool, with no session (SessionID) yet: Run first waits for one to
	// claim it, and BootstrapCode is its launch code (see
	// sandboxwire.EnvPoolSandbox).
	PoolSandbox string
	Gateway     string
	// Token is the sandbox token; without one, Run gets it for BootstrapCode
	// before anything else (POST bootstrap), and forgets the code.
	Token         string
	BootstrapCode string
	Workspace     string
	Heartbeat     time.Duration
	// Poll is how often the inbox is read while the push connection is
	// down (or there is none); PushedPoll (default 10 s) how often while it
	// is up, every write to the inbox being pushed, should a push be lost.
	Poll       time.Duration
	PushedPoll time.Duration
	// PushURL is the push channel (see sandboxwire.EnvPushURL); "" none:
	// the inbox is polled only.
	PushURL string
	// EnvFile is where env values the user submits are written.
	EnvFile string
	// LLM, TokenLimit and ContextWindow are the brain's (see Brain).
	LLM           agentconfig.LLM
	TokenLimit    int
	ContextWindow int
	// Tools is the environment of the commands the agent runs (never its
	// own); ToolUser, if set, who they run as. Nil Tools passes the agent's
	// own environment (tests).
	Tools    *toolenv.Env
	ToolUser *toolenv.User
	// Secrets are the secret values the sandbox knows, hidden from tool
	// output, events and logs; Run adds its token and the user's env values.
	Secrets *redact.Secrets
	// Tmux names the tmux session the agent runs in ("" outside tmux), where
	// the configuration's services get a window each.
	Tmux string
	// ModelGateway is the platform's base URL for model calls (the gateway's
	// unless RA_MODEL_GATEWAY_URL moves it).
	ModelGateway string
	// Job is job mode's (spec.job): where the job directory goes, and limits.
	Job jobmode.Config
	// Envd is where the sandbox serves envd, the E2B sandbox API
	// ("unix:<path>" or "<host>:<port>"; "" none).
	Envd string
}

// NewConfig takes the sandbox's settings from the agent's environment, which
// must name the sandbox's session, gateway and token or bootstrap code, or,
// for a sandbox of the warm pool, its pool sandbox, gateway and launch code
// (agentconfig.Env.CheckSandbox).
// environ is that environment's entries, of which the commands the agent runs
// get the host variables only; secrets are the values to hide. A sandbox calls
// the hosted model providers through the platform's model gateway
// (ViaGateway): their SDK's base URL is the session's model route and their
// key its sandbox token, so no provider key is needed, or used, in a sandbox.
func NewConfig(env agentconfig.Env, environ []string, secrets *redact.Secrets) (Config, error) {
	if err := env.CheckSandbox(); err != nil {
		return Config{}, fmt.Errorf("sandbox: %w", err)
	}
	workspace, err := filepath.Abs(env.Workspace)
	if err != nil {
		return Config{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	var user *toolenv.User
	if env.ToolUser != "" {
		if user, err = toolenv.LookupUser(env.ToolUser, workspace); err != nil {
			return Config{}, fmt.Errorf("sandbox: RA_TOOL_USER: %w", err)
		}
	}
	secrets.Add(env.SandboxToken, env.BootstrapCode, env.LLM.APIKey)
	return Config{
		Tools:         toolenv.New(environ, workspace, user),
		ToolUser:      user,
		Secrets:       secrets,
		SessionID:     env.SessionID,
		PoolSandbox:   env.PoolSandbox,
		Gateway:       env.GatewayURL,
		Token:         env.SandboxToken,
		BootstrapCode: env.BootstrapCode,
		Workspace:     env.Workspace,
		Heartbeat:     env.Heartbeat,
		Poll:          env.InboxPoll,
		PushURL:       env.PushURL,
		EnvFile:       env.EnvFile,
		LLM:           ViaGateway(env),
		TokenLimit:    env.TokenLimit,
		ContextWindow: env.ContextWindow,
		Tmux:          tmuxSession(env.Tmux),
		ModelGateway:  cmp.Or(env.ModelGatewayURL, env.GatewayURL),
		Job:           jobmode.Config{Root: cmp.Or(env.JobRoot, env.Workspace), NetworkIsolated: env.JobNetworkIsolated, Dedicated: env.Dedicated},
		Envd:          env.EnvdListen,
	}, nil
}

// tmuxSession is the tmux session the agent runs in, if it does.
func tmuxSession(t agentconfig.Tmux) string {
	if !t.Inside {
		return ""
	}
	return t.SessionName
}

// ViaGateway is the model env configures, as a sandbox calls it: a hosted
// provider (sandboxwire.ViaGateway) through the platform's model route, with
// the sandbox token as its key, whatever key or base URL the environment
// holds (a sandbox started with a bootstrap code has no token yet: Run sets
// it once exchanged; a pool sandbox has no session yet either: Run sets both
// once claimed); a local server or the scripted provider as configured.
func ViaGateway(env agentconfig.Env) agentconfig.LLM {
	l := env.LLM
	if sandboxwire.ViaGateway(l.Provider) {
		l.BaseURL = sandboxwire.ModelBaseURL(cmp.Or(env.ModelGatewayURL, env.GatewayURL), env.SessionID, l.Provider)
		l.APIKey, l.APIKeyEnv = env.SandboxToken, ""
	}
	return l
}

// claimed is c once the session of claim has claimed the sandbox: that
// session's, with its token, and the model route of that session when the
// provider is reached through the gateway (ViaGateway).
func claimed(c Config, claim poolwait.Claim) Config {
	c.SessionID, c.Token, c.BootstrapCode = claim.Session, claim.Token, ""
	if sandboxwire.ViaGateway(c.LLM.Provider) {
		c.LLM.BaseURL = sandboxwire.ModelBaseURL(cmp.Or(c.ModelGateway, c.Gateway), c.SessionID, c.LLM.Provider)
		c.LLM.APIKey, c.LLM.APIKeyEnv = c.Token, ""
	}
	return c
}
