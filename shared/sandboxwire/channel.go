package sandboxwire

import "time"

// Routes of the sandbox channel, relative to Prefix + the session id + "/".
const (
	Prefix         = "/sandbox/"
	RouteSpec      = "spec"
	RouteStatus    = "status"
	RouteHeartbeat = "heartbeat"
	RouteInbox     = "inbox"
	RouteEvents    = "events"
	RouteUploads   = "uploads"
	// (RouteToolResults: workspacetool.go.)
	// RouteBootstrap exchanges the launch's one-time bootstrap code (the
	// bearer) for the sandbox token; a code works once.
	RouteBootstrap = "bootstrap"
	// InboxAfter is the inbox's query parameter: the cursor to read after.
	InboxAfter = "after"
)

// State is where a session is in its life (package session's State).
type State string

// The states a sandbox reports (Ready, Working, Idle, Ended, Failed) or is told
// of in Orders (any of them).
const (
	Provisioning State = "provisioning"
	Ready        State = "ready"
	Working      State = "working"
	Idle         State = "idle"
	Ending       State = "ending"
	Ended        State = "ended"
	Failed       State = "failed"
	// Pausing: the sandbox is writing a checkpoint, after which it stops;
	// Paused: the checkpoint is verified and no sandbox runs; Resuming: a
	// sandbox is launched to go on from the checkpoint (POST …/pause,
	// …/resume).
	Pausing  State = "pausing"
	Paused   State = "paused"
	Resuming State = "resuming"
)

// Terminal reports whether s is ended or failed.
func (s State) Terminal() bool { return s == Ended || s == Failed }

// Reason says why a session ended or failed.
type Reason string

// The reasons. A sandbox may report those in Reportable; the platform sets
// ReasonLost itself, for a sandbox that stopped heart-beating.
const (
	ReasonShutdown Reason = "shutdown"
	ReasonTimeout  Reason = "timeout"
	ReasonCrashed  Reason = "crashed"
	ReasonLost     Reason = "lost"
	ReasonIdle     Reason = "idle"
	ReasonError    Reason = "error"
	// ReasonTokenLimit: the session used up its token budget.
	ReasonTokenLimit Reason = "token_limit"
	// ReasonModelUnavailable: the sandbox found no usable model (none
	// configured, or its key missing), so the agent could not answer.
	ReasonModelUnavailable Reason = "model_unavailable"
	// The platform's limits of a session (session limits): it ran its
	// maximum time, it was idle past its idle timeout, its model calls used
	// its token budget.
	ReasonMaxDuration Reason = "max_duration"
	ReasonIdleTimeout Reason = "idle_timeout"
	ReasonTokenBudget Reason = "token_budget"
	ReasonCostBudget  Reason = "cost_budget"
)

// Reportable lists the reasons a sandbox may send with ended or failed.
var Reportable = []Reason{ReasonShutdown, ReasonIdle, ReasonError, ReasonTimeout, ReasonCrashed, ReasonTokenLimit, ReasonModelUnavailable}

// SessionSetup is the session type whose sandbox registers the setup-only tools.
const SessionSetup = "setup"

// Spec is what a sandbox runs (GET spec).
type Spec struct {
	SessionID       string     `json:"session_id"`
	Generation      int        `json:"generation"`
	Guardrails      Guardrails `json:"guardrails"`
	Persona         Persona    `json:"persona"`
	InitialPrompt   string     `json:"initial_prompt"`
	FeatureFlags    Features   `json:"feature_flags"`
	TmuxSessionName string     `json:"tmux_session_name"`
	// SessionType decides which contract tools the sandbox registers (setup-only
	// tools only in SessionSetup sessions).
	SessionType     string `json:"session_type"`
	ConfigurationID string `json:"configuration_id,omitempty"`
	// PromptMode and SystemPrompt are the mode prompt (package prompts), primed
	// right after the guardrails.
	PromptMode   string `json:"prompt_mode"`
	SystemPrompt string `json:"system_prompt"`
	// Env holds the env values users persisted for the session's
	// configuration, which the sandbox merges into its env file before it
	// reports ready. Secret: served to the sandbox only, never stored or logged.
	Env map[string]string `json:"env,omitempty"`
	// Tools are the workspace tools the sandbox registers (its agent type's,
	// by their toolspec names); the model is offered only those, besides the
	// contract tools of its session type, and a call to any other is refused.
	// Null is every workspace tool (a session without an agent type); an
	// empty list is none.
	Tools []string `json:"tools"`
	// Workspace is the workspace to provision before ready; nil: none (the
	// session's agent type has no workspace).
	Workspace *WorkspaceSpec `json:"workspace,omitempty"`
	// Job, when set, puts the sandbox in job mode: it runs one orchestrator
	// job (JobSpec) in its job directory instead of a conversation.
	Job *JobSpec `json:"job,omitempty"`
	// Resume, when set, is the checkpoint the sandbox goes on from (a
	// resume): it restores its workspace and the agent's state from it,
	// instead of provisioning and answering the initial prompt, and then
	// reports ready.
	Resume *Checkpoint `json:"resume,omitempty"`
	// CheckpointSeconds is how often the sandbox writes a checkpoint
	// between its agent's turns (0: only when paused).
	CheckpointSeconds int `json:"checkpoint_seconds,omitempty"`
	// ProcessEnv is the environment of the processes a client starts
	// through envd: a sandbox API sandbox's envVars. Secret like Env.
	ProcessEnv map[string]string `json:"process_env,omitempty"`
}

// Guardrails is the platform guardrails document and its SHA-256, which ready
// reports back.
type Guardrails struct {
	Content string `json:"content"`
	Hash    string `json:"hash"`
}

// GuardrailsHashLen is the length of a guardrails hash (hex SHA-256).
const GuardrailsHashLen = 64

// Persona is who the agent is: its skill and experience are primed after the
// guardrails.
type Persona struct {
	Slug       string `json:"slug"`
	Name       string `json:"display_name"`
	Skill      string `json:"skill"`
	Experience string `json:"experience"`
	Active     bool   `json:"active"`
}

// Features are the embed view's optional parts for the session.
type Features struct {
	FileUpload   bool `json:"file_upload"`
	ContextUsage bool `json:"context_usage"`
	VoiceMic     bool `json:"voice_mic"`
}

// BootstrapResponse answers POST bootstrap: the sandbox token, the bearer of
// every other channel call and tool callback, for the launch generation the
// code was given to.
type BootstrapResponse struct {
	SandboxToken string `json:"sandbox_token"`
	Generation   int    `json:"generation"`
}

// HeartbeatReport is a heartbeat's optional body: what the sandbox measures
// of itself (a job's sandbox sends it; the job's resources show it).
type HeartbeatReport struct {
	Usage *ResourceSample `json:"usage,omitempty"`
	// Busy says the agent is at work (a turn, a tool running): activity, for
	// the idle timeout. A heartbeat by itself is none.
	Busy bool `json:"busy,omitempty"`
}

// ResourceSample is one measure of a sandbox's use: CPU as a percentage of
// what it was allocated (its process tree's CPU time over the interval), and
// the memory its processes hold, in MB.
type ResourceSample struct {
	CPUPercent float64 `json:"cpu_percent"`
	MemoryMB   float64 `json:"memory_mb"`
	// Files and LogBytes, for a job's sandbox, are what the job made so
	// far: the files in its output/ and the size of its log.
	Files    int   `json:"files,omitempty"`
	LogBytes int64 `json:"log_bytes,omitempty"`
}

// MaxHeartbeatBytes bounds a heartbeat's body.
const MaxHeartbeatBytes = 1024

// StatusReport is what a sandbox reports (POST status).
type StatusReport struct {
	State          State  `json:"state"`
	GuardrailsHash string `json:"guardrails_hash,omitempty"`
	Reason         Reason `json:"reason,omitempty"`
	// Workspace, with ready, is how provisioning went.
	Workspace *WorkspaceStatus `json:"workspace,omitempty"`
	// Job, with ended or failed in job mode, is how the job went.
	Job *JobReport `json:"job,omitempty"`
}

// Orders answers status reports, heartbeats and inbox reads.
type Orders struct {
	Stop  bool  `json:"stop"`
	State State `json:"state"`
	// Messages are the user messages after the inbox cursor (inbox only);
	// Next is the cursor to ask with next time.
	Messages []InboxMessage `json:"messages,omitempty"`
	// Env holds env values users submitted since the cursor (inbox only), for the
	// sandbox's env file.
	Env map[string]string `json:"env,omitempty"`
	// ToolRequests are the workspace tool requests apps made since the
	// cursor that have no result yet (inbox only), in order.
	ToolRequests []ToolRequest `json:"tool_requests,omitempty"`
	Next         int64         `json:"next,omitempty"`
	// Viewers is how many viewers watch the agent (see PushWatch): the
	// sandbox posts its live events only while one does. ViewerEpoch
	// counts the changes to them: of what it is told (here, and pushed), a
	// sandbox keeps the highest epoch's.
	Viewers     int   `json:"viewers,omitempty"`
	ViewerEpoch int64 `json:"viewer_epoch,omitempty"`
}

// InboxMessage is a message a user sent the agent: text, files, or the answer
// to one of the agent's questions.
type InboxMessage struct {
	Seq         int64             `json:"seq"`
	Text        string            `json:"text"`
	At          string            `json:"at"`
	Answer      *Answer           `json:"answer,omitempty"`
	Attachments []InboxAttachment `json:"attachments,omitempty"`
	// Interrupt: stop the turn in progress before taking this message.
	Interrupt bool `json:"interrupt,omitempty"`
}

// Answer is the option a user clicked for one of the agent's questions.
type Answer struct {
	QuestionID string `json:"question_id"`
	OptionID   string `json:"option_id"`
}

// InboxAttachment is a file a user attached, to download within AttachmentTTL.
type InboxAttachment struct {
	Name        string `json:"name"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type,omitempty"`
	URL         string `json:"url"`
}

// AttachmentTTL is how long an inbox attachment URL works.
const AttachmentTTL = 15 * time.Minute

// EventsRequest is what a sandbox appends (POST events): 1 to
// MaxEventsPerAppend events.
type EventsRequest struct {
	// ID, if set, makes the append exactly-once: a retry with the same ID
	// and events appends nothing again and is answered the first append's
	// numbers; the same ID with other events is idempotency_key_reused.
	ID     string  `json:"id,omitempty"`
	Events []Event `json:"events"`
}

// MaxAppendIDLen bounds an EventsRequest's ID (printable ASCII).
const MaxAppendIDLen = 128

// EventsResponse numbers the appended events.
type EventsResponse struct {
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
}

// UploadsRequest asks for upload URLs for the files of one gateway tool call
// (POST uploads).
type UploadsRequest struct {
	Tool       string       `json:"tool"`
	ToolCallID string       `json:"tool_call_id"`
	Files      []UploadFile `json:"files"`
}

// UploadFile is one file to upload, by its path relative to the uploaded folder.
type UploadFile struct {
	Path        string `json:"path"`
	SizeBytes   int64  `json:"size_bytes"`
	ContentType string `json:"content_type,omitempty"`
}

// UploadsResponse has one presigned PUT URL per file, valid for UploadTTL.
type UploadsResponse struct {
	Uploads []Upload `json:"uploads"`
}

// Upload is where one file goes: a PUT to URL with Headers, exactly (they
// are signed), and a body of exactly the size asked for.
type Upload struct {
	Path    string            `json:"path"`
	Key     string            `json:"key"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}
