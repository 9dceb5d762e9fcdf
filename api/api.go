// Package api ships the description of the platform's HTTP API: openapi.json,
// an OpenAPI 3.1 document of every route of the route table (shared/routes),
// their bodies, error envelopes and codes, auth schemes and the events
// stream's frames. It is the one copy: the dev server serves it at
// /openapi.json, and the tests validate every answer they get against it
// (package apitest).
package api

import (
	"bytes"
	_ "embed" // the document
)

//go:embed openapi.json
var document []byte

// OpenAPI returns the OpenAPI 3.1 document, as JSON.
func OpenAPI() []byte { return bytes.Clone(document) }
