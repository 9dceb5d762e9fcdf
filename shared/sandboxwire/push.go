package sandboxwire

// The push channel: one WebSocket connection per sandbox (on AWS to an API
// Gateway WebSocket API, locally to the dev server), over which the platform
// pushes a Push frame whenever it adds to the sandbox's inbox or orders it to
// stop. The sandbox answers a frame by reading its inbox at once; the inbox
// stays the durable record, and the sandbox's inbox poll the fallback while
// the connection is down.
//
// The sandbox connects to EnvPushURL with its sandbox token as the bearer of
// the upgrade request ("Authorization: Bearer …") and its session id as the
// PushSessionParam query parameter.
const (
	// EnvPushURL is the push channel's URL (ws:// or wss://), the WebSocket
	// API's stage URL on AWS; unset, the sandbox only polls.
	EnvPushURL = "RA_PUSH_URL"
	// PushSessionParam is the query parameter naming the session on connect.
	PushSessionParam = "session_id"
	// PushInbox is the type of the frame that says the inbox has something
	// new (or the session is to stop): read it now.
	PushInbox = "inbox"
	// PushWatch is the type of the frame that says how many viewers watch
	// the agent (Push.Viewers): while none does, the sandbox posts no live
	// events; once one does, it posts the reply being written from its
	// start.
	PushWatch = "watch"
	// MaxPushFrameBytes bounds a frame the sandbox reads.
	MaxPushFrameBytes = 4096
	// MaxConnectionIDLen bounds a push connection id (API Gateway's are 16
	// characters).
	MaxConnectionIDLen = 128
)

// Push is a frame the platform pushes to a sandbox.
type Push struct {
	Type string `json:"type"`
	// Session is the session of a PushAssigned frame.
	Session string `json:"session_id,omitempty"`
	// Viewers is how many viewers watch the agent (a PushWatch frame), as
	// of ViewerEpoch (Orders.ViewerEpoch).
	Viewers     int   `json:"viewers,omitempty"`
	ViewerEpoch int64 `json:"viewer_epoch,omitempty"`
}
