// Package modelgateway decides and meters the model calls of sandboxes: a
// sandbox's model SDK points at the platform's model route
// (/sandbox/{sessionId}/model/{provider}/…, package sandboxwire) with its
// sandbox token as API key, and the gateway checks the token (the session's
// current sandbox, the session not over), the provider (one the platform
// serves), the operation (only the provider's model calls: no file, batch or
// account API goes through) and the model (RA_MODEL_ALLOWED), then has the
// call forwarded with the platform's own credential (package modelapi) and
// reads the tokens used from the provider's own answer (Meter), streamed or
// not, into the session's usage. The sandbox never holds a provider key, and
// cannot change what is metered: the numbers come from the provider.
//
// It is domain code: no HTTP and no AWS SDK. The proxy is modelapi's; the
// keys come from Keys (the process environment here, Secrets Manager in
// package smsecrets).
package modelgateway
