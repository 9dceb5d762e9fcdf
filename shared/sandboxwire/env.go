package sandboxwire

// The environment a launcher gives a sandbox: who it is, where the platform
// is, and its token. The sandbox inherits nothing else of the platform's.
const (
	// EnvSessionID is the session the sandbox runs.
	EnvSessionID = "RA_SESSION_ID"
	// EnvGeneration is the launch generation it runs for.
	EnvGeneration = "RA_GENERATION"
	// EnvGatewayURL is the platform's base URL (the sandbox channel and tool
	// callbacks hang off it).
	EnvGatewayURL = "RA_GATEWAY_URL"
	// EnvSandboxToken is the sandbox token: bearer of every channel call.
	EnvSandboxToken = "RA_SANDBOX_TOKEN"
)

// EnvTmuxSessionName names the terminal session the agent runs in, if tmux is
// there.
const EnvTmuxSessionName = "RA_TMUX_SESSION_NAME"
