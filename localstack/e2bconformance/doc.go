// Package e2bconformance runs the sandbox API's conformance suite
// (conformance.test.mjs): the unmodified E2B SDK, each pinned version
// (localstack/package.json: the last before /v2 and the first after it), or
// the one RA_E2B_SDK names (make e2b-latest), against a dev server with its
// sandbox proxy, through the three variables docs/e2b.md gives.
package e2bconformance
