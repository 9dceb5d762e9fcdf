package jobevents

import "strings"

// The stable id of an event travels in the envelope's resources, the same way
// on every transport: EventBridge picks the envelope's id itself (a new one on
// each PutEvents, a retried publish included), so the orchestrator deduplicates
// by the resource, never by the envelope's id. The spec's payload (detail) is
// left exactly as the spec has it.
const resourcePrefix = "ra:job/"

// Resource is the envelope resource naming event e:
// "ra:job/<jobId>/event/<event id>". It is the envelope's only resource.
func Resource(e Event) string {
	return resourcePrefix + e.Detail.JobID + "/event/" + e.ID
}

// EventID returns the stable id of the event env carries (from its resource),
// and false when env carries none (not a job event).
func (env Envelope) EventID() (string, bool) {
	for _, r := range env.Resources {
		rest, ok := strings.CutPrefix(r, resourcePrefix)
		if !ok {
			continue
		}
		if _, id, ok := strings.Cut(rest, "/event/"); ok && id != "" {
			return id, true
		}
	}
	return "", false
}
