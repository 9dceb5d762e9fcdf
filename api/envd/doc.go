// Package envd holds the wire contract of envd, the agent inside an E2B
// sandbox, as the E2B SDKs call it: process/process.proto and
// filesystem/filesystem.proto, and the Go code generated from them (the
// messages in process and filesystem, the Connect handlers and clients in
// their …connect packages). Our envd (sandbox/envd) serves them.
package envd

//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate
