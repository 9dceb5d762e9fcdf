package workspaceapi

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/session"
)

// The bodies the handler decodes and encodes are the document's: each type
// has the JSON fields of its schema (api/openapi.json, package schema), at
// every depth, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, b := range []apitest.Body{
		apitest.BodyOf[session.WorkspaceToolRequest, schema.WorkspaceToolRequest](),
		apitest.BodyOf[session.WorkspaceToolResult, schema.WorkspaceToolResult](),
		apitest.BodyOf[session.WorkspaceToolPending, schema.WorkspaceToolPending](),
	} {
		for _, d := range b.Differences() {
			t.Error(d)
		}
	}
}
