package sandboxwire

import (
	"slices"
	"strings"
)

// The environment a launcher gives a sandbox: who it is, where the platform
// is, under the names of the agent contract (agent-contract.md 6.4), and a
// one-time bootstrap code, which the agent exchanges for its sandbox token
// (RouteBootstrap) before anything else. The sandbox inherits nothing else of
// the platform's.
//
// The token itself is never in a launcher's environment: on ECS that
// environment is in the RunTask overrides, which DescribeTasks and CloudTrail
// show; a code spent at start is worth nothing to their readers.
// SANDBOX_MCP_AUTH_TOKEN keeps its contract meaning, the sandbox token, inside
// the agent (which takes it from the environment too, when a launcher of its
// own sets it instead of a code).
const (
	// EnvSessionID is the session the sandbox runs.
	EnvSessionID = "PROLIFERATE_SESSION_ID"
	// EnvGatewayURL is the platform's base URL (the sandbox channel and tool
	// callbacks hang off it).
	EnvGatewayURL = "PROLIFERATE_GATEWAY_URL"
	// EnvSandboxToken is the sandbox token: bearer of every channel call and
	// tool callback.
	EnvSandboxToken = "SANDBOX_MCP_AUTH_TOKEN" //nolint:gosec // the variable's name, not a credential
	// EnvBootstrapCode is the one-time code the sandbox exchanges for its
	// token (POST RouteBootstrap, the code as bearer).
	EnvBootstrapCode = "RA_BOOTSTRAP_CODE"
	// EnvGeneration is the launch generation it runs for (the contract names
	// none; informational).
	EnvGeneration = "RA_GENERATION"
)

// EnvTmuxSessionName names the terminal session the agent runs in, if tmux is
// there.
const EnvTmuxSessionName = "RA_TMUX_SESSION_NAME"

// EnvNetworkIsolated is set (to "1") by a launcher that runs the sandbox
// cut off from every network but the platform's: its egress goes through
// the platform's proxy, whose policy for it allows nothing. A job without
// network may then run bash without a network namespace of its own, which
// a Fargate task cannot make.
const EnvNetworkIsolated = "RA_JOB_NETWORK_ISOLATED"

// The env file: a JSON object of the env values users submit (and those
// persisted for the session's configuration), which the agent reads key by
// key. Outside the workspace, so that no commit or snapshot takes it along.
const (
	// DefaultEnvFile is where it is (agent-contract.md 6.6).
	DefaultEnvFile = "/tmp/.proliferate_env.json"
	// EnvFileVar moves it: a launcher running several sandboxes on one machine
	// gives each its own.
	EnvFileVar = "RA_ENV_FILE"
)

// HostVariables are the variables of a host's environment that a sandbox, and
// every command its agent runs, take over: where programs are, whose home,
// the language (LC_* too) and the terminal. Nothing else of a launcher's
// environment (its credentials, its settings, its keys) reaches a sandbox,
// and nothing else of the agent's reaches its tools.
var HostVariables = []string{"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL"}

// NetworkVariables are what a sandbox whose network is cut off (its
// egress through the platform's proxy) is told by its launcher, and every
// command its agent runs takes over: the proxy (both spellings, which
// programs read one or the other of) and the certificates to trust, the
// system's and its proxy's authority (each variable a kind of program
// reads). Never from a host's environment, never a user's env value.
var NetworkVariables = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy",
	"SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS",
}

// EgressCAHost is the host a sandbox asks its egress proxy for its
// certificate authority at, and EgressCAURL where (through the proxy:
// answered for the asking sandbox alone).
const (
	EgressCAHost = "egress.remote-agents.internal"
	EgressCAURL  = "http://" + EgressCAHost + "/ca.pem"
)

// ProxyVariables are the variables that name the egress proxy (both
// spellings: programs read one or the other).
var ProxyVariables = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// ProxyEnv is the entries that name proxyURL the sandbox's proxy.
func ProxyEnv(proxyURL string) []string {
	out := make([]string, 0, len(ProxyVariables))
	for _, name := range ProxyVariables {
		out = append(out, name+"="+proxyURL)
	}
	return out
}

// The files a sandbox behind the egress proxy trusts, in a folder its
// commands can read: the system's certificates and its proxy's authority,
// and the authority alone.
const (
	TrustBundleFile = "ca-bundle.pem"
	TrustCAFile     = "egress-ca.pem"
)

// TrustEnv is the entries that make programs trust bundle (the system's
// certificates and the proxy's authority), or for Node, which adds to its
// own, ca (the authority alone).
func TrustEnv(bundle, ca string) []string {
	return []string{"SSL_CERT_FILE=" + bundle, "CURL_CA_BUNDLE=" + bundle, "GIT_SSL_CAINFO=" + bundle,
		"REQUESTS_CA_BUNDLE=" + bundle, "PIP_CERT=" + bundle, "NODE_EXTRA_CA_CERTS=" + ca}
}

// FromNetwork reports whether name is one of NetworkVariables.
func FromNetwork(name string) bool { return slices.Contains(NetworkVariables, name) }

// NetworkEnv returns the entries ("NAME=value") of environ that pass
// FromNetwork.
func NetworkEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && FromNetwork(name) {
			out = append(out, kv)
		}
	}
	return out
}

// FromHost reports whether the host variable name passes (HostVariables,
// LC_*).
func FromHost(name string) bool {
	return slices.Contains(HostVariables, name) || (strings.HasPrefix(name, "LC_") && len(name) > len("LC_"))
}

// HostEnv returns the entries ("NAME=value") of environ that pass FromHost.
func HostEnv(environ []string) []string {
	out := make([]string, 0, len(HostVariables))
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && FromHost(name) {
			out = append(out, kv)
		}
	}
	return out
}

// EnvTmuxSupervisorPID names, in the environment of the tmux server a
// sandbox's supervisor starts (and of the agent inside), the supervisor's
// pid: the sandbox's process, by which its launcher knows the server as
// that sandbox's and not the next one's of the same agent.
const EnvTmuxSupervisorPID = "RA_TMUX_SUPERVISOR_PID"

// EnvEnvdListen is where a sandbox serves envd, the E2B sandbox API, for
// the sandbox proxy: "unix:<path>" (a process sandbox: a socket in its
// folder) or "<host>:<port>" (a Fargate task: EnvdPort on every address).
const EnvEnvdListen = "RA_ENVD_LISTEN"

// EnvdPort is the port envd listens on in a Fargate task, the E2B SDKs'.
const EnvdPort = 49983

// EnvdVersion is the envd version sandboxes serve, as the sandbox API
// answers it: the SDKs turn their features on by it (0.6.4 enables every
// one envd serves: stdin control, closing stdin, octet-stream and gzip
// uploads, file metadata, watch events with their entries).
const EnvdVersion = "0.6.4"
