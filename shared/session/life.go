package session

import (
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Recorded reports whether the platform records s's life in its event
// stream (the lifecycle events): an app's agent does; a job's sandbox does
// not (its log is its job's, and it belongs to no app).
func Recorded(s Session) bool { return s.Tenant != "" && s.JobID == "" }

// CreatedEvent is the event that starts the stream of s, created at at:
// agent.created; ok is false for a session whose life is not recorded.
func CreatedEvent(s Session, at time.Time) (e Event, ok bool) {
	if !Recorded(s) {
		return Event{}, false
	}
	return lifeEvent(s, sandboxwire.TypeAgentCreated, at), true
}

// LifeEvent is the lifecycle event recording that s, as it is after a
// transition, entered its state at: agent.ready, agent.ended or
// agent.failed; ok is false for a session whose life is not recorded or a
// state no event records. The stores take its number in the same write as
// the change, so a reader that sees the state knows the event is there.
func LifeEvent(s Session, at time.Time) (e Event, ok bool) {
	if !Recorded(s) {
		return Event{}, false
	}
	var typ string
	switch s.State {
	case Ready:
		typ = sandboxwire.TypeAgentReady
	case Ended:
		typ = sandboxwire.TypeAgentEnded
	case Failed:
		typ = sandboxwire.TypeAgentFailed
	case Pausing, Paused, Resuming:
		// What its sandbox says of itself (working, idle) it says in
		// state.changed; these the platform says, the same way.
		typ = sandboxwire.TypeStateChanged
	default:
		return Event{}, false
	}
	return lifeEvent(s, typ, at), true
}

func lifeEvent(s Session, typ string, at time.Time) Event {
	data := map[string]any{"state": string(s.State)}
	if s.Reason != "" {
		data["reason"] = string(s.Reason)
	}
	return Event{SessionID: s.ID, Type: typ, Data: data, At: at.UTC()}
}

// RecordsChange reports whether a transition of session s, as it is
// before, to state to is one its stream records: into ready the first time
// (from provisioning, or from resuming for a fork, which starts resuming
// from its source's checkpoint; once, however often the sandbox reports
// it), into pausing, paused and resuming, and into ended or failed.
func RecordsChange(s Session, to State) bool {
	from := s.State
	switch {
	case to == Ready:
		return from == Provisioning || (from == Resuming && s.ReadyAt.IsZero())
	case to == Pausing || to == Paused || to == Resuming:
		return from != to
	case to.Terminal():
		return !from.Terminal()
	}
	return false
}

// AppStream is the stream of what happens to tenant's app rather than to
// one of its agents (quota.exceeded): it is read like an agent's, by this
// id, which no session has.
func AppStream(tenant string) string { return appStreamPrefix + tenant }

// AppOf is the tenant whose app stream stream is, ok false for an agent's.
func AppOf(stream string) (tenant string, ok bool) {
	return strings.CutPrefix(stream, appStreamPrefix)
}

const appStreamPrefix = "app#"
