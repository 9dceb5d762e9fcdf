package agentconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Env is what the agent takes from its environment: in a sandbox, who it is
// and where the platform is (set by the launcher), its workspace, pacing and
// model; anywhere, the secrets a configuration names by variable. LoadEnv reads
// it once, at the agent's entry, and it is passed down from there: no other
// package of the agent reads these variables.
type Env struct {
	// SessionID, GatewayURL (without a trailing slash) and SandboxToken are the
	// sandbox's identity, under the agent contract's names
	// (PROLIFERATE_SESSION_ID, PROLIFERATE_GATEWAY_URL, SANDBOX_MCP_AUTH_TOKEN).
	// The platform's launchers pass BootstrapCode (RA_BOOTSTRAP_CODE) instead of
	// the token, a one-time code the agent exchanges for it at start; `agent
	// sandbox` needs the session, the gateway and one of the two, or a
	// PoolSandbox instead of the session (CheckSandbox).
	SessionID     string
	GatewayURL    string
	SandboxToken  string
	BootstrapCode string
	// PoolSandbox is the pool sandbox id (RA_POOL_SANDBOX) of a sandbox
	// launched into the warm pool: it has no session yet (no SessionID) and
	// a BootstrapCode that is its launch code, exchanged for its pool key,
	// never a token (sandboxwire.EnvPoolSandbox).
	PoolSandbox string
	// ModelGatewayURL is where a sandbox reaches the platform's model route
	// (RA_MODEL_GATEWAY_URL, without a trailing slash), when the platform
	// serves it elsewhere than GatewayURL; "" for GatewayURL.
	ModelGatewayURL string
	// PushURL is the platform's push channel (RA_PUSH_URL, ws:// or wss://):
	// a sandbox holds one connection to it and reads its inbox whenever a
	// frame arrives; "" none (it polls only).
	PushURL string
	// InboxPoll is how often a sandbox reads its inbox without being pushed
	// to (RA_INBOX_POLL_SECONDS, default 1 s): the fallback while its push
	// connection is down.
	InboxPoll time.Duration
	// Workspace is the folder the agent works in (RA_WORKSPACE, default ".").
	Workspace string
	// EnvFile is where env values users submit, and those persisted for the
	// session's configuration, are written (RA_ENV_FILE, default
	// sandboxwire.DefaultEnvFile).
	EnvFile string
	// Heartbeat is how often a sandbox says it is alive (RA_HEARTBEAT_SECONDS,
	// default 10 s).
	Heartbeat time.Duration
	// LLM is a sandbox's model: the defaults' LLM with RA_LLM_PROVIDER,
	// RA_LLM_MODEL, RA_LLM_API_KEY_ENV, RA_LLM_BASE_URL, RA_LLM_SCRIPT,
	// RA_LLM_MAX_TOKENS and RA_LLM_TEMPERATURE over it, and its APIKey read
	// from the variables LLM.KeyEnvs names (Key).
	LLM LLM
	// TokenLimit ends a sandbox's session once its input and output tokens
	// exceed it (RA_TOKEN_LIMIT; 0, the default: no limit).
	TokenLimit int
	// ContextWindow is the model's context size in tokens, shown against what
	// the conversation holds (RA_LLM_CONTEXT_WINDOW, default
	// DefaultContextWindow).
	ContextWindow int
	// Tmux says whether and where a sandbox runs inside tmux.
	Tmux Tmux
	// ToolUser names the user (name or id) a sandbox runs its tools' commands
	// as (RA_TOOL_USER): the agent must then run as root. "" runs them as the
	// agent's own user.
	ToolUser string
	// EnvdListen is where a sandbox serves envd, the E2B sandbox API
	// (RA_ENVD_LISTEN: "unix:<path>" or "<host>:<port>"; "" serves none).
	EnvdListen string
	// JobRoot is where a sandbox in job mode lays out its job directory,
	// <JobRoot>/{job_id} (RA_JOB_ROOT; the image sets /agent-space; ""
	// is the workspace).
	JobRoot string
	// JobNetworkIsolated says the launcher runs the sandbox where nothing
	// reaches a network but the platform (RA_JOB_NETWORK_ISOLATED, set to
	// anything: a sandbox launched cut off, whose egress policy is none), so
	// a job without network may run bash where no network namespace can be
	// made.
	JobNetworkIsolated bool
	// Dedicated says the sandbox is a machine of its own (RA_SANDBOX_DEDICATED,
	// set to anything: a Fargate task), with no other sandbox's files on it.
	Dedicated bool

	lookup func(string) (string, bool)
}

// Tmux is the terminal session a sandbox runs in.
type Tmux struct {
	// SessionName names the tmux session (RA_TMUX_SESSION_NAME); none: no tmux.
	SessionName string
	// Disabled keeps the agent out of tmux (RA_NO_TMUX set to anything).
	Disabled bool
	// Inside, SupervisorPID and LogPipe are set by the supervisor for the agent
	// it starts inside the session (EnvInTmux, EnvTmuxSupervisorPID,
	// EnvTmuxLogPipe): LogPipe is where the agent writes its logs for the
	// supervisor's log stream.
	Inside        bool
	SupervisorPID int
	LogPipe       string
	// EnvPipe is where the agent inside reads the environment the launcher
	// gave its supervisor (EnvTmuxEnvPipe).
	EnvPipe string
}

// The variables the tmux supervisor sets for the agent it starts.
const (
	EnvInTmux            = "RA_IN_TMUX"
	EnvTmuxSupervisorPID = sandboxwire.EnvTmuxSupervisorPID
	EnvTmuxLogPipe       = "RA_TMUX_LOG_PIPE"
	// EnvTmuxEnvPipe names the pipe the supervisor hands the agent its
	// environment through: the tmux server, which any process of the user can
	// ask for its environment, gets only the host variables.
	EnvTmuxEnvPipe = "RA_TMUX_ENV_PIPE"
)

// TmuxVariables are the variables the supervisor sets for the agent inside:
// that agent takes them from its own environment, everything else from the
// environment handed over.
var TmuxVariables = []string{EnvInTmux, EnvTmuxSupervisorPID, EnvTmuxLogPipe, EnvTmuxEnvPipe}

// DefaultContextWindow is the context window assumed when none is configured.
const DefaultContextWindow = 200000

// EnvDefaults returns the environment's defaults: the default LLM, the current
// folder as workspace, the contract's env file, 10 s heartbeats, no token limit.
func EnvDefaults() Env {
	return Env{
		Workspace: ".",
		EnvFile:   sandboxwire.DefaultEnvFile,
		Heartbeat: 10 * time.Second,
		InboxPoll: time.Second,
		// No provider until RA_LLM_PROVIDER names one: a sandbox never falls back
		// to the scripted provider by itself.
		LLM:           LLM{MaxTokens: Defaults().LLM.MaxTokens, TimeoutSeconds: Defaults().LLM.TimeoutSeconds},
		ContextWindow: DefaultContextWindow,
	}
}

// envVar is one variable of the agent's environment and the field it sets,
// with its value parsed and checked (the error need not name the variable:
// LoadEnv does).
type envVar struct {
	name string
	set  func(e *Env, v string) error
}

// envVars is the table of the agent's variables. An unset or blank variable
// keeps the default.
var envVars = []envVar{
	{name: sandboxwire.EnvSessionID, set: func(e *Env, v string) error { e.SessionID = v; return nil }},
	{name: sandboxwire.EnvGatewayURL, set: func(e *Env, v string) error { e.GatewayURL = strings.TrimRight(v, "/"); return nil }},
	{name: sandboxwire.EnvSandboxToken, set: func(e *Env, v string) error { e.SandboxToken = v; return nil }},
	{name: sandboxwire.EnvBootstrapCode, set: func(e *Env, v string) error { e.BootstrapCode = v; return nil }},
	{name: sandboxwire.EnvPoolSandbox, set: func(e *Env, v string) error { e.PoolSandbox = v; return nil }},
	{name: sandboxwire.EnvModelGatewayURL, set: func(e *Env, v string) error { e.ModelGatewayURL = strings.TrimRight(v, "/"); return nil }},
	{name: sandboxwire.EnvPushURL, set: func(e *Env, v string) error {
		if !strings.HasPrefix(v, "ws://") && !strings.HasPrefix(v, "wss://") {
			return fmt.Errorf("want a ws:// or wss:// URL, got %q", v)
		}
		e.PushURL = v
		return nil
	}},
	{name: "RA_INBOX_POLL_SECONDS", set: func(e *Env, v string) error {
		d, err := time.ParseDuration(v + "s")
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive number of seconds, got %q", v)
		}
		e.InboxPoll = d
		return nil
	}},
	{name: "RA_WORKSPACE", set: func(e *Env, v string) error { e.Workspace = v; return nil }},
	{name: sandboxwire.EnvFileVar, set: func(e *Env, v string) error { e.EnvFile = v; return nil }},
	{name: "RA_HEARTBEAT_SECONDS", set: func(e *Env, v string) error {
		d, err := time.ParseDuration(v + "s")
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive number of seconds, got %q", v)
		}
		e.Heartbeat = d
		return nil
	}},
	{name: "RA_LLM_PROVIDER", set: func(e *Env, v string) error { e.LLM.Provider = v; return checkProvider(v) }},
	{name: "RA_LLM_MODEL", set: func(e *Env, v string) error { e.LLM.Model = v; return nil }},
	{name: "RA_LLM_API_KEY_ENV", set: func(e *Env, v string) error { e.LLM.APIKeyEnv = v; return nil }},
	{name: "RA_LLM_BASE_URL", set: func(e *Env, v string) error { e.LLM.BaseURL = v; return nil }},
	{name: "RA_LLM_SCRIPT", set: func(e *Env, v string) error { e.LLM.Script = v; return nil }},
	{name: "RA_LLM_MAX_TOKENS", set: func(e *Env, v string) (err error) {
		n, err := count(v, 1)
		if err == nil && n > maxMaxTokens {
			err = fmt.Errorf("want at most %d, got %q", maxMaxTokens, v)
		}
		e.LLM.MaxTokens = n
		return err
	}},
	{name: "RA_LLM_TEMPERATURE", set: func(e *Env, v string) error {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("want a number 0..%d, got %q", MaxTemperature, v)
		}
		e.LLM.Temperature = &t
		return checkTemperature(&t)
	}},
	{name: "RA_TOKEN_LIMIT", set: func(e *Env, v string) (err error) {
		e.TokenLimit, err = count(v, 0)
		return err
	}},
	{name: "RA_LLM_CONTEXT_WINDOW", set: func(e *Env, v string) (err error) {
		e.ContextWindow, err = count(v, 1)
		return err
	}},
	{name: sandboxwire.EnvTmuxSessionName, set: func(e *Env, v string) error { e.Tmux.SessionName = v; return nil }},
	{name: "RA_NO_TMUX", set: func(e *Env, _ string) error { e.Tmux.Disabled = true; return nil }},
	{name: EnvInTmux, set: func(e *Env, _ string) error { e.Tmux.Inside = true; return nil }},
	{name: EnvTmuxSupervisorPID, set: func(e *Env, v string) (err error) {
		e.Tmux.SupervisorPID, err = count(v, 1)
		return err
	}},
	{name: EnvTmuxLogPipe, set: func(e *Env, v string) error { e.Tmux.LogPipe = v; return nil }},
	{name: EnvTmuxEnvPipe, set: func(e *Env, v string) error { e.Tmux.EnvPipe = v; return nil }},
	{name: "RA_TOOL_USER", set: func(e *Env, v string) error { e.ToolUser = v; return nil }},
	{name: "RA_JOB_ROOT", set: func(e *Env, v string) error { e.JobRoot = v; return nil }},
	{name: sandboxwire.EnvEnvdListen, set: func(e *Env, v string) error { e.EnvdListen = v; return nil }},
	{name: sandboxwire.EnvNetworkIsolated, set: func(e *Env, _ string) error { e.JobNetworkIsolated = true; return nil }},
	{name: "RA_SANDBOX_DEDICATED", set: func(e *Env, _ string) error { e.Dedicated = true; return nil }},
}

// count parses a whole number of at least least.
func count(v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		return 0, fmt.Errorf("want a whole number of at least %d, got %q", least, v)
	}
	return n, nil
}

// LoadEnv reads the agent's variables through lookup (os.LookupEnv) over
// EnvDefaults. A malformed value is an error naming its variable; missing
// sandbox variables are reported by CheckSandbox, since only `agent sandbox`
// needs them. Secrets are read through lookup later, by name (Secret).
func LoadEnv(lookup func(string) (string, bool)) (Env, error) {
	e := EnvDefaults()
	e.lookup = lookup
	for _, v := range envVars {
		val, _ := lookup(v.name)
		val = strings.TrimSpace(val)
		if val == "" {
			continue
		}
		if err := v.set(&e, val); err != nil {
			return Env{}, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	e.LLM.APIKey = e.Key(e.LLM)
	return e, nil
}

// Key returns l's API key: the value of the first of l.KeyEnvs that is set;
// "" when none is (or l takes no key).
func (e Env) Key(l LLM) string {
	for _, name := range l.KeyEnvs() {
		if v := e.Secret(name); v != "" {
			return v
		}
	}
	return ""
}

// CheckSandbox reports the variables a sandbox needs that are not set, or set
// together when they exclude each other. A sandbox runs a session
// (PROLIFERATE_SESSION_ID, with a bootstrap code or a token) or waits in the
// warm pool (RA_POOL_SANDBOX, with its launch code as the bootstrap code and
// no token): exactly one of the two.
func (e Env) CheckSandbox() error {
	if e.SessionID != "" && e.PoolSandbox != "" {
		return fmt.Errorf("%s and %s are both set: a sandbox runs a session or waits in the pool, not both",
			sandboxwire.EnvSessionID, sandboxwire.EnvPoolSandbox)
	}
	if e.PoolSandbox != "" {
		return e.checkPoolSandbox()
	}
	return missing([]struct{ name, value string }{
		{sandboxwire.EnvSessionID + " (or " + sandboxwire.EnvPoolSandbox + ")", e.SessionID},
		{sandboxwire.EnvGatewayURL, e.GatewayURL},
		{sandboxwire.EnvBootstrapCode + " (or " + sandboxwire.EnvSandboxToken + ")", e.SandboxToken + e.BootstrapCode},
	})
}

// checkPoolSandbox is CheckSandbox for a pool sandbox: the gateway and the
// launch code, and no sandbox token (a token is a session's).
func (e Env) checkPoolSandbox() error {
	if e.SandboxToken != "" {
		return fmt.Errorf("%s is set with %s: a pool sandbox has no session, hence no token, only its launch code (%s)",
			sandboxwire.EnvSandboxToken, sandboxwire.EnvPoolSandbox, sandboxwire.EnvBootstrapCode)
	}
	return missing([]struct{ name, value string }{
		{sandboxwire.EnvGatewayURL, e.GatewayURL},
		{sandboxwire.EnvBootstrapCode, e.BootstrapCode},
	})
}

// missing reports the variables of vars whose value is empty.
func missing(vars []struct{ name, value string }) error {
	var names []string
	for _, v := range vars {
		if v.value == "" {
			names = append(names, v.name)
		}
	}
	if len(names) > 0 {
		return fmt.Errorf("%s required in a sandbox, not set", strings.Join(names, ", "))
	}
	return nil
}

// Secret returns the variable name, which a configuration names as holding a
// secret (an API key, a token); "" if it is not set or name is empty.
func (e Env) Secret(name string) string {
	if name == "" || e.lookup == nil {
		return ""
	}
	v, _ := e.lookup(name)
	return v
}

// secretSuffixes end the names of variables that hold secrets, by convention.
var secretSuffixes = []string{"_API_KEY", "_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_CREDENTIALS_RELATIVE_URI", "_CREDENTIALS_FULL_URI"}

// SecretName reports whether the variable name holds a secret of the agent's:
// its sandbox token and bootstrap code, a model provider's key, any *_API_KEY,
// *_KEY, *_TOKEN, *_SECRET, *_PASSWORD, and the ECS credential endpoints
// (AWS_CONTAINER_CREDENTIALS_*). A sandbox hides their values in what it
// lets out and removes them from its environment once read.
func SecretName(name string) bool {
	if name == sandboxwire.EnvSandboxToken || name == sandboxwire.EnvBootstrapCode {
		return true
	}
	upper := strings.ToUpper(name)
	for _, s := range secretSuffixes {
		if strings.HasSuffix(upper, s) {
			return true
		}
	}
	return false
}

// Secrets returns the names and values of the variables of environ
// ("NAME=value" entries) that hold secrets: those SecretName recognises and
// those the configured model reads its key from (LLM.KeyEnvs).
func (e Env) Secrets(environ []string) map[string]string {
	keys := e.LLM.KeyEnvs()
	out := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && value != "" && (SecretName(name) || slices.Contains(keys, name)) {
			out[name] = value
		}
	}
	return out
}
