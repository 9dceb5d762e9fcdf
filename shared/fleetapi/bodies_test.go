package fleetapi

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/fleet"
)

// The bodies the fleet routes encode are the document's: each type has the
// JSON fields of its schema (api/openapi.json, package schema), at every
// depth, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, b := range []apitest.Body{
		apitest.BodyOf[fleet.ListPage, schema.AgentList](),
		apitest.BodyOf[fleet.KillStatus, schema.KillStatus](),
	} {
		for _, d := range b.Differences() {
			t.Error(d)
		}
	}
}
