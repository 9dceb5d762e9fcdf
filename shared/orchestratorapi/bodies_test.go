package orchestratorapi

import (
	"testing"

	"github.com/remote-agents/remote-agents/api/apitest"
	"github.com/remote-agents/remote-agents/api/schema"
	"github.com/remote-agents/remote-agents/shared/job"
)

// The bodies the handlers decode and encode are the document's: each type
// has the JSON fields of its schema (api/openapi.json, package schema), at
// every depth, with the same kinds.
func TestBodiesAreTheDocuments(t *testing.T) {
	for _, b := range []apitest.Body{
		apitest.BodyOf[job.CreateRequest, schema.CreateJobRequest](),
		apitest.BodyOf[job.View, schema.Job](),
		apitest.BodyOf[outputsBody, schema.JobOutputs](),
		apitest.BodyOf[job.ProfileInput, schema.AgentProfileInput](),
		apitest.BodyOf[job.Profile, schema.AgentProfile](),
		apitest.BodyOf[profilesBody, schema.AgentProfiles](),
	} {
		for _, d := range b.Differences() {
			t.Error(d)
		}
	}
}
