package jobevents_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/jobevents"
)

func TestResourceCarriesTheEventID(t *testing.T) {
	t.Parallel()
	e := jobevents.Event{ID: "j-1:agent.job.created", Detail: jobevents.Detail{JobID: "j-1"}}
	if got := jobevents.Resource(e); got != "ra:job/j-1/event/j-1:agent.job.created" {
		t.Errorf("Resource = %q", got)
	}
	tests := []struct {
		name      string
		resources []string
		want      string
		ok        bool
	}{
		{"ours", []string{jobevents.Resource(e)}, e.ID, true},
		{"among others", []string{"arn:aws:ecs:us-east-1:1:task/x", jobevents.Resource(e)}, e.ID, true},
		{"none", nil, "", false},
		{"not ours", []string{"arn:aws:ecs:us-east-1:1:task/x"}, "", false},
		{"no event", []string{"ra:job/j-1"}, "", false},
		{"empty id", []string{"ra:job/j-1/event/"}, "", false},
	}
	for _, tt := range tests {
		got, ok := jobevents.Envelope{Resources: tt.resources}.EventID()
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: EventID = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
