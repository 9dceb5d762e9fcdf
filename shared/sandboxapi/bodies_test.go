package sandboxapi

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// The bodies the handlers decode and encode (the sandbox's wire package) are
// the document's: each type has the JSON fields of its schema
// (api/openapi.json, package schema), at every depth, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, b := range []apitest.Body{
		apitest.BodyOf[sandboxwire.BootstrapResponse, schema.BootstrapResponse](),
		apitest.BodyOf[sandboxwire.Spec, schema.Spec](),
		apitest.BodyOf[sandboxwire.StatusReport, schema.StatusReport](),
		apitest.BodyOf[sandboxwire.HeartbeatReport, schema.HeartbeatReport](),
		apitest.BodyOf[sandboxwire.Orders, schema.Orders](),
		apitest.BodyOf[sandboxwire.EventsRequest, schema.EventsRequest](),
		apitest.BodyOf[sandboxwire.EventsResponse, schema.EventsResponse](),
		apitest.BodyOf[sandboxwire.UploadsRequest, schema.UploadsRequest](),
		apitest.BodyOf[sandboxwire.UploadsResponse, schema.UploadsResponse](),
		apitest.BodyOf[sandboxwire.ToolResult, schema.SandboxToolResult](),
		apitest.BodyOf[sandboxwire.ToolResultResponse, schema.ToolResultResponse](),
		apitest.BodyOf[sandboxwire.PoolBootstrapResponse, schema.PoolBootstrapResponse](),
		apitest.BodyOf[sandboxwire.PoolHeartbeat, schema.PoolHeartbeat](),
		apitest.BodyOf[sandboxwire.PoolOrders, schema.PoolOrders](),
		apitest.BodyOf[sandboxwire.JobSpec, schema.JobSpec](),
		apitest.BodyOf[sandboxwire.JobReport, schema.JobReport](),
	} {
		for _, d := range b.Differences() {
			t.Error(d)
		}
	}
}
