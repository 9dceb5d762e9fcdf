package agenttypeapi

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/agenttype"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// The bodies the handlers decode and encode are the document's: each type
// has the JSON fields of its schema (api/openapi.json, package schema), at
// every depth, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, b := range []apitest.Body{
		apitest.BodyOf[agenttype.CreateRequest, schema.CreateAgentTypeRequest](),
		apitest.BodyOf[agenttype.View, schema.AgentType](),
		apitest.BodyOf[agenttype.List, schema.AgentTypeList](),
		apitest.BodyOf[registry.WorkspaceConfig, schema.WorkspaceConfig](),
		apitest.BodyOf[registry.WorkspaceConfig, schema.StoredWorkspaceConfig](),
	} {
		for _, d := range b.Differences() {
			t.Error(d)
		}
	}
}
