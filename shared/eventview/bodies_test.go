package eventview

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
)

// An event's data on the stream is the document's EventMessage: the same
// JSON fields, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, d := range apitest.BodyOf[Message, schema.EventMessage]().Differences() {
		t.Error(d)
	}
}
