package sessionapi

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/session"
)

// The bodies the handlers decode and encode are the document's: each type
// has the JSON fields of its schema (api/openapi.json, package schema), at
// every depth, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, b := range []apitest.Body{
		apitest.BodyOf[session.CreateRequest, schema.CreateRequest](),
		apitest.BodyOf[session.Created, schema.Created](),
		apitest.BodyOf[session.AliveStatus, schema.AliveStatus](),
		apitest.BodyOf[session.ShutdownStatus, schema.ShutdownStatus](),
		apitest.BodyOf[session.EnvSubmission, schema.EnvSubmission](),
		apitest.BodyOf[session.EnvReceipt, schema.EnvReceipt](),
		apitest.BodyOf[session.MessageRequest, schema.MessageRequest](),
		apitest.BodyOf[session.MessageReceipt, schema.MessageReceipt](),
		apitest.BodyOf[session.AttachmentUpload, schema.PresignedUpload](),
	} {
		for _, d := range b.Differences() {
			t.Error(d)
		}
	}
}
