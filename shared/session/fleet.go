package session

import (
	"errors"
	"slices"
	"time"
)

// ReasonKilled: the session was killed (POST kill): stopped at once, no grace.
const ReasonKilled Reason = "killed"

// listKeyLayout is fixed-width, so that list keys sort as times do.
const listKeyLayout = "20060102T150405.000000000Z"

// ListKey is the fleet list's sort key of a session created at t: its UTC
// creation time to the nanosecond, fixed width, then its id, so that a
// tenant's sessions have one stable order, ties included.
func ListKey(t time.Time, id string) string {
	return t.UTC().Format(listKeyLayout) + "#" + id
}

// ListFilter selects sessions of the fleet list; zero fields select all.
type ListFilter struct {
	ProjectName string
	PersonaSlug string
	AgentType   string
	// States, if not empty, are the states to list.
	States []State
}

// ErrBadCursor: a list cursor that is not one the list returned to the caller.
var ErrBadCursor = errors.New("invalid list cursor")

// Matches reports whether s is selected by f (stores that cannot filter in
// their query use it; dynamo.Sessions filters in DynamoDB).
func Matches(s Session, f ListFilter) bool {
	return (f.ProjectName == "" || s.ProjectName == f.ProjectName) &&
		(f.PersonaSlug == "" || s.PersonaSlug == f.PersonaSlug) &&
		(f.AgentType == "" || s.AgentType == f.AgentType) &&
		(len(f.States) == 0 || slices.Contains(f.States, s.State))
}
