// Package webhook delivers an app's agents' events to the app's endpoints
// as Standard Webhooks (standardwebhooks.com): each delivery is an event
// already in an agent's ordered stream, sent once it is there, retried with
// backoff until the receiver takes it, in order, and replayable by
// sequence number with its original webhook-id.
//
// An app registers endpoints (Service); a trigger per agent whose stream
// grew (Announcer, from the events table's change stream) reaches the
// Deliverer through a queue; the Deliverer sends what each endpoint has not
// taken yet, from a cursor per endpoint and agent.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// The event types an endpoint subscribes to (Standard Webhooks' "type").
const (
	AgentCreated      = sandboxwire.TypeAgentCreated
	AgentReady        = sandboxwire.TypeAgentReady
	AgentStateChanged = "agent.state_changed"
	AgentEnded        = sandboxwire.TypeAgentEnded
	AgentFailed       = sandboxwire.TypeAgentFailed
	AgentMessage      = sandboxwire.TypeAgentMessage
	AgentQuestion     = sandboxwire.TypeAgentQuestion
	WorkspaceReady    = sandboxwire.TypeWorkspaceReady
	WorkspaceWarning  = sandboxwire.TypeWorkspaceWarning
	JobStarted        = "job.started"
	JobSucceeded      = "job.succeeded"
	JobFailed         = "job.failed"
	JobAlert          = "job.alert"
	BudgetExceeded    = sandboxwire.TypeBudgetExceeded
	QuotaExceeded     = "quota.exceeded"
	// All subscribes to every type, those added later included.
	All = "*"
)

// Types lists the event types an endpoint may name. The job.* types are
// accepted but not delivered: jobs belong to the orchestrator, not to an
// app (docs/api.md).
var Types = []string{
	AgentCreated, AgentReady, AgentStateChanged, AgentEnded, AgentFailed, AgentMessage, AgentQuestion,
	WorkspaceReady, WorkspaceWarning, JobStarted, JobSucceeded, JobFailed, JobAlert, BudgetExceeded, QuotaExceeded,
}

// Bounds.
const (
	// MaxEndpoints is how many endpoints an app holds.
	MaxEndpoints = 20
	// MaxURLBytes bounds an endpoint's URL, MaxDescriptionBytes its
	// description.
	MaxURLBytes         = 2048
	MaxDescriptionBytes = 1024
	// MaxBodyBytes bounds a delivery's body; MaxTextBytes an agent
	// message's text in it (cut, with text_truncated).
	MaxBodyBytes = 64 << 10
	MaxTextBytes = 16 << 10
	// Timeout bounds one delivery attempt: connect, send, answer.
	Timeout = 10 * time.Second
	// RetryFor is how long an event is retried before it is dead-lettered.
	RetryFor = 24 * time.Hour
	// FirstRetry is the first retry's wait, doubled up to MaxRetryWait,
	// each jittered to between half and all of it.
	FirstRetry   = 5 * time.Second
	MaxRetryWait = time.Hour
	// SecretOverlap is how long a rotated-out secret still signs.
	SecretOverlap = 24 * time.Hour
	// LogRetention is how long a delivery stays in the log.
	LogRetention = 14 * 24 * time.Hour
)

// SecretPrefix starts every signing secret (Standard Webhooks'): the rest
// is the key, base64.
const SecretPrefix = "whsec_"

// Endpoint is one of an app's webhook endpoints.
type Endpoint struct {
	ID          string   `json:"id"`
	Tenant      string   `json:"tenant"`
	URL         string   `json:"url"`
	Description string   `json:"description,omitempty"`
	Events      []string `json:"events"`
	// Secret signs every delivery; PreviousSecret, until
	// PreviousExpiresAt, signs beside it (a rotation's overlap).
	Secret            string    `json:"secret"`
	PreviousSecret    string    `json:"previous_secret,omitempty"`
	PreviousExpiresAt time.Time `json:"previous_expires_at,omitzero"`
	// Disabled endpoints get nothing (a 410 answer disables one).
	Disabled       bool      `json:"disabled,omitempty"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Wants reports whether ep subscribes to events of type typ.
func (ep Endpoint) Wants(typ string) bool {
	return slices.Contains(ep.Events, All) || slices.Contains(ep.Events, typ)
}

// Secrets are the secrets that sign a delivery at now: the current one,
// and the previous one during its overlap.
func (ep Endpoint) Secrets(now time.Time) []string {
	out := []string{ep.Secret}
	if ep.PreviousSecret != "" && now.Before(ep.PreviousExpiresAt) {
		out = append(out, ep.PreviousSecret)
	}
	return out
}

// NewSecret is a new signing secret: SecretPrefix and 32 random bytes,
// base64.
func NewSecret() string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(randomBytes(32))
}

// NewID is a new endpoint id: "wh_" and 26 random base32 characters.
func NewID() string {
	return "wh_" + strings.ToLower(base32NoPad.EncodeToString(randomBytes(16)))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return b
}

// Message is one delivery: an event of a stream, as the receiver gets it.
type Message struct {
	// ID is the webhook-id: the same on every attempt and replay.
	ID string
	// Type is the webhook event type.
	Type string
	// Stream and Seq name the event in its stream.
	Stream string
	Seq    int64
	At     time.Time
	// Body is the JSON body: {"type", "timestamp", "data"}.
	Body []byte
}

// MessageID is the webhook-id of event seq of stream: "msg_", the stream
// and the number.
func MessageID(stream string, seq int64) string {
	return "msg_" + strings.ReplaceAll(stream, "#", "_") + "_" + strconv.FormatInt(seq, 10)
}

// FromEvent is the delivery of event e of stream agent (an agent's id, or
// an app's own stream: session.AppStream, whose events name no agent), ok
// false for an event no webhook type maps to. state.changed becomes agent.state_changed; the
// other types keep their names.
func FromEvent(agent string, e session.Event) (Message, bool, error) {
	typ, ok := TypeOf(e.Type)
	if !ok {
		return Message{}, false, nil
	}
	data := map[string]any{}
	for k, v := range e.Data {
		data[k] = v
	}
	if text, ok := data["text"].(string); ok && len(text) > MaxTextBytes {
		data["text"] = cut(text, MaxTextBytes)
		data["text_truncated"] = true
	}
	if _, app := session.AppOf(agent); agent != "" && !app {
		data["agent_id"] = agent
	}
	data["sequence"] = e.Seq
	body, err := json.Marshal(struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}{typ, e.At.UTC().Format(time.RFC3339Nano), data})
	if err != nil {
		return Message{}, false, fmt.Errorf("webhook body of %s %d: %w", e.SessionID, e.Seq, err)
	}
	if len(body) > MaxBodyBytes {
		// Only an event's other fields could make it this large: send what
		// names it, so the receiver can read it from the stream.
		body, _ = json.Marshal(map[string]any{"type": typ, "timestamp": e.At.UTC().Format(time.RFC3339Nano),
			"data": map[string]any{"agent_id": agent, "sequence": e.Seq, "truncated": true}})
	}
	return Message{ID: MessageID(e.SessionID, e.Seq), Type: typ, Stream: e.SessionID, Seq: e.Seq, At: e.At, Body: body}, true, nil
}

// TypeOf is the webhook type events of stream type typ are delivered as,
// ok false for a type no webhook carries.
func TypeOf(typ string) (string, bool) {
	switch typ {
	case sandboxwire.TypeStateChanged:
		return AgentStateChanged, true
	case AgentCreated, AgentReady, AgentEnded, AgentFailed, AgentMessage, AgentQuestion,
		WorkspaceReady, WorkspaceWarning, BudgetExceeded, QuotaExceeded:
		return typ, true
	}
	return "", false
}

// ByCreation orders endpoints oldest first (by id where made at once), as
// stores list them.
func ByCreation(a, b Endpoint) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// cut is s cut to at most n bytes, at a rune boundary.
func cut(s string, n int) string {
	for n > 0 && n < len(s) && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Sign is the webhook-signature header of a message with id, sent at ts
// with body: "v1," and the base64 HMAC-SHA256 of "id.timestamp.body" for
// each secret, space-separated.
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
		if err != nil {
			return "", fmt.Errorf("webhook secret: %w", err)
		}
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%d.", id, ts.Unix())
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}
