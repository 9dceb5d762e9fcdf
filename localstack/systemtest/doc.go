// Package systemtest holds the system tests: each runs the whole system on a
// dev server (package devtest, the one harness) with the local AWS emulators,
// the real agent binary as its sandboxes, tmux and a headless Chromium, and
// drives it over HTTP as apps, browsers and sandboxes do. They prove the
// wiring: routes to functions to services, queues, the sandbox channel, the
// API's document, each function's declared AWS access. The rules of a
// service are tested beside the service, on the in-memory store.
//
// The fault suite (TestFault…), the security suite (TestSecurity…) and the
// benchmarks the report tool runs (localstack/tools/benchreport) live here.
package systemtest
