// Package sandboxwire is the contract between a sandbox and the platform: the
// sandbox channel's paths, request and response bodies, every event type with
// one payload struct each, the environment a launcher gives a sandbox, and the
// limits and checks both sides apply.
//
// It imports the standard library only, so that the agent binary links nothing
// of the platform (stores, queues, AWS SDKs) to speak to it; depguard
// (.golangci.yml) keeps it so. Both sides encode and decode these types: change
// a field here and both change together.
//
// The channel, under /sandbox/{sessionId}/, authenticated by the sandbox token
// (bootstrap by the launch's one-time code):
//
//	POST bootstrap  the one-time code for the sandbox token, once
//	GET  spec       what to run: guardrails, persona, initial prompt, mode, flags
//	POST status     ready (with the guardrails hash used), working, idle, ended, failed
//	POST heartbeat  still alive; answers whether to stop
//	GET  inbox      user messages and env values after a cursor; stop once ending
//	POST events     append what happened (messages, tool calls, states)
//	POST uploads    presigned URLs for the files of one gateway tool call
//	POST tool-results  the result of a workspace tool request an app made
//	POST model/{provider}/…  a model call, to the provider's API through the
//	                platform's model gateway (see RouteModel)
package sandboxwire
