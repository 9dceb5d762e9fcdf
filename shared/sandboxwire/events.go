package sandboxwire

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// The event types. Sandboxes append the agent's (agent.*, tool.call,
// state.changed, session.token_limit, env.request); the platform appends the
// user's (user.message, env.submitted). Apps and the embed view read them all.
const (
	TypeAgentMessage  = "agent.message"
	TypeAgentError    = "agent.error"
	TypeAgentQuestion = "agent.question"
	TypeToolCall      = "tool.call"
	TypeStateChanged  = "state.changed"
	TypeTokenLimit    = "session.token_limit"
	TypeEnvRequest    = "env.request"
	TypeUserMessage   = "user.message"
	TypeEnvSubmitted  = "env.submitted"
	// TypeOutputVerification and TypeOutputSnapshot are appended by the
	// platform when verify and save_snapshot have kept their files.
	TypeOutputVerification = "output.verification"
	TypeOutputSnapshot     = "output.snapshot"
	// TypeAutomationCompleted is appended when automation.complete recorded a
	// run's outcome.
	TypeAutomationCompleted = "automation.completed"
	// TypeBudgetExceeded is appended by the model gateway when a spend cap
	// stopped the agent's model calls.
	TypeBudgetExceeded = "budget.exceeded"
	// TypeEgressDenied is appended by the platform when its egress proxy
	// refused a connection of the agent's sandbox (once a minute for a
	// destination).
	TypeEgressDenied = "egress.denied"
	// The lifecycle events: the platform records an app's agent being
	// created, becoming ready, and ending or failing, in the same write as
	// the change (data: Lifecycle). Webhooks deliver them like every other
	// event of the stream.
	TypeAgentCreated = "agent.created"
	TypeAgentReady   = "agent.ready"
	TypeAgentEnded   = "agent.ended"
	TypeAgentFailed  = "agent.failed"
	// TypeQuotaExceeded is appended to an app's own stream when a create
	// was refused by a quota (once a minute for a quota; data:
	// QuotaExceeded).
	TypeQuotaExceeded = "quota.exceeded"
)

// QuotaExceeded is the data of quota.exceeded: which quota, its limit, and
// what the refused caller was told.
type QuotaExceeded struct {
	Quota   string `json:"quota"`
	Limit   int    `json:"limit"`
	Message string `json:"message"`
}

// EventType implements Payload.
func (QuotaExceeded) EventType() string { return TypeQuotaExceeded }

// Lifecycle is the data of a lifecycle event: the state the agent entered
// and, for an end, why.
type Lifecycle struct {
	State  State  `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Types lists every event type, for clients (the embed view) and tests.
var Types = []string{
	TypeAgentMessage, TypeAgentError, TypeAgentQuestion, TypeToolCall, TypeStateChanged,
	TypeTokenLimit, TypeBudgetExceeded, TypeEgressDenied, TypeEnvRequest, TypeUserMessage, TypeEnvSubmitted, TypeOutputVerification,
	TypeOutputSnapshot, TypeAutomationCompleted,
	TypeAgentCreated, TypeAgentReady, TypeAgentEnded, TypeAgentFailed,
	TypeWorkspaceCreating, TypeWorkspaceCloning, TypeWorkspaceSetup, TypeWorkspaceWarning, TypeWorkspaceReady,
	TypeWorkspaceToolRequest, TypeWorkspaceTool,
	TypeWorkspaceRestoring, TypeWorkspaceEnvFiles, TypeWorkspaceServices,
}

// SandboxTypes are the event types a sandbox may append (POST events): the
// agent's own. The others are the platform's, which it appends itself after
// checking who asked (user.message and env.submitted from a session token's
// holder, output.* and automation.completed from a tool's effect), so that
// nothing a sandbox sends passes for a user's message, a submission or a
// recorded output.
var SandboxTypes = []string{
	TypeAgentMessage, TypeAgentError, TypeAgentQuestion, TypeToolCall, TypeStateChanged, TypeTokenLimit, TypeEnvRequest,
	TypeWorkspaceCreating, TypeWorkspaceCloning, TypeWorkspaceSetup, TypeWorkspaceWarning, TypeWorkspaceReady,
	TypeWorkspaceRestoring, TypeWorkspaceEnvFiles, TypeWorkspaceServices,
}

// SandboxMaySend reports whether a sandbox may append events of type typ.
func SandboxMaySend(typ string) bool { return slices.Contains(SandboxTypes, typ) }

// Payload is the data of one event type.
type Payload interface {
	// EventType is the type of the events carrying this payload.
	EventType() string
}

// Event is one event on the wire: its type and its payload as a JSON object.
type Event struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// NewEvent encodes p as an event of its type.
func NewEvent(p Payload) (Event, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s: %w", p.EventType(), err)
	}
	return Event{Type: p.EventType(), Data: raw}, nil
}

// Decode decodes an event's data, given as the generic map a store keeps, into
// the payload p points to.
func Decode(data map[string]any, p Payload) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("decode %s: %w", p.EventType(), err)
	}
	if err := json.Unmarshal(raw, p); err != nil {
		return fmt.Errorf("decode %s: %w", p.EventType(), err)
	}
	return nil
}

// AgentMessage is a reply of the model: its text and how many tools it called.
type AgentMessage struct {
	// MessageID names the reply; its agent.message.delta pieces carry it.
	MessageID string `json:"message_id,omitempty"`
	Text      string `json:"text"`
	ToolCalls int    `json:"tool_calls"`
	Usage     Usage  `json:"usage"`
}

// Usage is the session's token use so far, and what the conversation holds now
// against the model's window.
type Usage struct {
	InputTokens   int `json:"input_tokens"`
	OutputTokens  int `json:"output_tokens"`
	ContextTokens int `json:"context_tokens"`
	ContextWindow int `json:"context_window"`
}

// AgentError is a failure the user should see, in words for them.
type AgentError struct {
	Text string `json:"text"`
}

// AgentQuestion is a question the agent asks, with options to click; the
// answer comes back as a UserMessage with an Answer.
type AgentQuestion struct {
	QuestionID string   `json:"question_id"`
	Text       string   `json:"text"`
	Options    []Option `json:"options"`
}

// Option is one answer to an AgentQuestion.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// ToolCall is one tool the agent ran, with its arguments and output cut to
// MaxEventTextChars. ToolCallID is the model's id of the call, which is also
// the tool_call_id of a gateway tool's callback.
type ToolCall struct {
	ToolCallID string `json:"tool_call_id,omitempty"`
	Tool       string `json:"tool"`
	Args       string `json:"args"`
	IsError    bool   `json:"is_error"`
	Output     string `json:"output"`
}

// StateChanged says the agent is working or idle.
type StateChanged struct {
	State State `json:"state"`
}

// TokenLimit says the session used up its token budget and is ending.
type TokenLimit struct {
	Limit int `json:"limit"`
	Used  int `json:"used"`
}

// BudgetExceeded says a spend cap stopped the agent's model calls: its own
// (ScopeSession, in USD or tokens) or its app's this UTC day or month; the
// agent ends.
type BudgetExceeded struct {
	Scope string `json:"scope"`
	// Unit is "usd" or "tokens".
	Unit     string    `json:"unit,omitempty"`
	Limit    float64   `json:"limit"`
	Spent    float64   `json:"spent"`
	ResetsAt time.Time `json:"resets_at,omitzero"`
	Message  string    `json:"message"`
}

// EgressDenied says the sandbox tried to reach a destination its egress
// policy does not allow: Host (a name or an address, as the program asked
// for it) and Port. Reason is "not_allowed", or "link_local" for the
// cloud's metadata addresses, which no policy allows.
type EgressDenied struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// EnvRequest asks the user for env values (request_env_variables).
type EnvRequest struct {
	ToolCallID string          `json:"tool_call_id"`
	Keys       []EnvKeyRequest `json:"keys"`
}

// EnvKeyRequest is one env value the agent asks for, as the model gave it to
// request_env_variables.
type EnvKeyRequest struct {
	Key         string          `json:"key"`
	Description string          `json:"description,omitempty"`
	Type        string          `json:"type,omitempty"`
	Required    *bool           `json:"required,omitempty"`
	Suggestions []EnvSuggestion `json:"suggestions,omitempty"`
}

// EnvSuggestion is a hint for one env value: a label, a value, instructions.
type EnvSuggestion struct {
	Label        string `json:"label"`
	Value        string `json:"value,omitempty"`
	Instructions string `json:"instructions,omitempty"`
}

// OutputVerification says verify kept the evidence files of one call.
type OutputVerification struct {
	Tool       string         `json:"tool"`
	ToolCallID string         `json:"tool_call_id"`
	Folder     string         `json:"folder"`
	Prefix     string         `json:"prefix"`
	Files      []VerifiedFile `json:"files"`
	FileCount  int            `json:"file_count"`
	TotalBytes int64          `json:"total_bytes"`
}

// VerifiedFile is one kept evidence file.
type VerifiedFile struct {
	Path      string `json:"path"`
	Key       string `json:"key"`
	SizeBytes int64  `json:"size_bytes"`
}

// AutomationCompleted says automation.complete recorded a run's outcome.
type AutomationCompleted struct {
	Tool         string `json:"tool"`
	ToolCallID   string `json:"tool_call_id"`
	RunID        string `json:"run_id"`
	CompletionID string `json:"completion_id"`
	Outcome      string `json:"outcome"`
}

// OutputSnapshot says save_snapshot kept the workspace archive, for the
// session or for its configuration (Target).
type OutputSnapshot struct {
	Tool        string `json:"tool"`
	ToolCallID  string `json:"tool_call_id"`
	SnapshotKey string `json:"snapshot_key"`
	Target      string `json:"target"`
	SizeBytes   int64  `json:"size_bytes"`
}

// UserMessage is a user's message: text, an answer, attachments.
type UserMessage struct {
	Text        string       `json:"text"`
	Answer      *Answer      `json:"answer,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// ClientMessageID is the sender's id for the message, when it gave one.
	ClientMessageID string `json:"client_message_id,omitempty"`
	// Interrupt: the agent's turn in progress stops before the message is
	// taken.
	Interrupt bool `json:"interrupt,omitempty"`
}

// Attachment is a file a user uploaded, by its object key.
type Attachment struct {
	Key         string `json:"key"`
	Name        string `json:"name"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type,omitempty"`
}

// EnvSubmitted names the env keys a user submitted and where the values are
// kept (never the values: events are shown to apps), and which of the keys
// were persisted for the session's configuration.
type EnvSubmitted struct {
	Keys      []string `json:"keys"`
	Ref       string   `json:"ref"`
	Persisted []string `json:"persisted,omitempty"`
}

// EventType implements Payload.
func (AgentMessage) EventType() string { return TypeAgentMessage }

// EventType implements Payload.
func (AgentError) EventType() string { return TypeAgentError }

// EventType implements Payload.
func (AgentQuestion) EventType() string { return TypeAgentQuestion }

// EventType implements Payload.
func (ToolCall) EventType() string { return TypeToolCall }

// EventType implements Payload.
func (StateChanged) EventType() string { return TypeStateChanged }

// EventType implements Payload.
func (TokenLimit) EventType() string { return TypeTokenLimit }

// EventType implements Payload.
func (BudgetExceeded) EventType() string { return TypeBudgetExceeded }

// EventType implements Payload.
func (EgressDenied) EventType() string { return TypeEgressDenied }

// EventType implements Payload.
func (EnvRequest) EventType() string { return TypeEnvRequest }

// EventType implements Payload.
func (UserMessage) EventType() string { return TypeUserMessage }

// EventType implements Payload.
func (EnvSubmitted) EventType() string { return TypeEnvSubmitted }

// EventType implements Payload.
func (OutputVerification) EventType() string { return TypeOutputVerification }

// EventType implements Payload.
func (OutputSnapshot) EventType() string { return TypeOutputSnapshot }

// EventType implements Payload.
func (AutomationCompleted) EventType() string { return TypeAutomationCompleted }

var eventType = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)

// ValidEventType reports whether typ is lower-case words joined by '.' or '_',
// at most MaxEventTypeLen bytes.
func ValidEventType(typ string) bool {
	return len(typ) <= MaxEventTypeLen && eventType.MatchString(typ)
}
