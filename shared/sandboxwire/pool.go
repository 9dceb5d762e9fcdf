package sandboxwire

// The warm pool's channel. A pool sandbox is launched for no session: its
// environment names its pool sandbox id (EnvPoolSandbox) instead of a session,
// with a one-time launch code (EnvBootstrapCode) and the gateway and push URLs.
// It
//
//  1. exchanges the launch code for its pool key (POST PoolPrefix + id +
//     "/" + RouteBootstrap, the code as the bearer): a bootstrap code of its
//     own, kept in memory only;
//  2. connects to the push channel with the pool key as the bearer and its id
//     as the PushPoolParam query parameter;
//  3. reports idle (POST PoolPrefix + id + "/" + RouteHeartbeat, body
//     PoolHeartbeat{Idle: true}) once it has done what needs no session (for
//     a fixed repository, the clone and the setup commands), and
//     heart-beats the same way while it waits;
//  4. on a PushAssigned frame (or a heartbeat answer naming a session, or on
//     each push connect, whichever comes first), exchanges its pool key as the
//     bootstrap code of that session (POST /sandbox/{sessionId}/bootstrap) and
//     from there on is that session's sandbox, like any cold one.
//
// A pool key opens nothing but the pool routes and, once claimed, the one
// session's bootstrap; a claimed sandbox never returns to the pool.
const (
	// EnvPoolSandbox is the pool sandbox id of a sandbox launched into the
	// warm pool (no session yet); a pool sandbox has no EnvSessionID.
	EnvPoolSandbox = "RA_POOL_SANDBOX"
	// PoolPrefix starts the pool routes: PoolPrefix + id + "/" + route.
	PoolPrefix = "/sandbox-pool/"
	// PushPoolParam is the query parameter naming the pool sandbox on
	// connect (instead of PushSessionParam).
	PushPoolParam = "pool_sandbox"
	// PushAssigned is the type of the frame that tells a pool sandbox it was
	// claimed: its Session field names the session.
	PushAssigned = "assigned"
	// MaxPoolHeartbeatBytes bounds a pool heartbeat's body.
	MaxPoolHeartbeatBytes = 1024
)

// PoolBootstrapResponse answers a pool sandbox's POST bootstrap: its pool key,
// the bearer of its pool calls and, once claimed, its session's bootstrap code.
type PoolBootstrapResponse struct {
	PoolKey string `json:"pool_key"`
	// TmuxSessionName is the terminal session the sandbox runs in (the one its
	// launch named); its session takes it over.
	TmuxSessionName string `json:"tmux_session_name,omitempty"`
	// Workspace, for a type whose repository is fixed, is what the sandbox
	// provisions before its claim (the clone and the setup commands): a
	// session of the type whose workspace is the same finds it done.
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`
}

// PoolHeartbeat is a pool sandbox's heartbeat. Idle says it is ready to be
// claimed (it has done everything that needs no session).
type PoolHeartbeat struct {
	Idle bool `json:"idle"`
}

// PoolOrders answers a pool heartbeat: the session that claimed the sandbox,
// if one did; Stop when it is to stop (retired, or forgotten by the pool).
type PoolOrders struct {
	SessionID string `json:"session_id,omitempty"`
	Stop      bool   `json:"stop,omitempty"`
}
