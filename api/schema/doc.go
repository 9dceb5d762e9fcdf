// Package schema holds the Go types of the API's bodies: one per schema of
// api/openapi.json (and per operation's parameters), generated from the
// document by oapi-codegen (schema.gen.go). The document is the one source of
// the API's types: the client's types are these, the handlers' are checked
// against them (api/apitest), and the document itself against the route
// table and every answer the tests get.
//
// Edit the document, then run go generate ./api/schema; a test fails while
// schema.gen.go differs from what the document gives. The generated code
// imports the standard library only.
package schema

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml -o schema.gen.go ../openapi.json
