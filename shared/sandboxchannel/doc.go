// Package sandboxchannel is the platform's side of the sandbox channel
// (package sandboxwire): what a session's sandbox may read and do, each call
// authenticated by its bootstrap code or the sandbox token of the session's
// current launch — bootstrap, spec, status reports, heartbeats, the inbox,
// events, uploads, workspace tool results and the push connection.
package sandboxchannel
