package sandboxwire

import "encoding/json"

// JobSpec is the orchestrator job a sandbox in job mode runs (Spec.Job): the
// job's input, limits and the agent profile that runs it. The sandbox lays out
// its job directory (JobDirs under the job root, /agent-space/{job_id} in the
// image), writes InputData to input/ and runs the profile's agent there.
type JobSpec struct {
	JobID string `json:"job_id"`
	// InputData is the job's inputData object, written to input/input.json;
	// its "files" member, when an object of path → content, also as files.
	InputData  json.RawMessage `json:"input_data"`
	TokenLimit int64           `json:"token_limit"`
	// TimeoutSeconds bounds the run (constraints.timeout); 0: the default.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// MemoryMB is constraints.memory (the task size on AWS, a limit locally).
	MemoryMB int `json:"memory_mb,omitempty"`
	// Network allows the agent's tools network access (constraints.network).
	Network bool       `json:"network"`
	Profile JobProfile `json:"profile"`
}

// JobProfile is the agent profile a job runs with (the spec's agents table).
type JobProfile struct {
	AgentID     string  `json:"agent_id"`
	Name        string  `json:"name"`
	Level       string  `json:"agent_level"`
	Provider    string  `json:"llm_provider"`
	Model       string  `json:"llm_model"`
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
	// AllowedSkills are the tools (registry names) the job's agent gets, and
	// nothing else; Agentfiles are named Agentfiles stored with the profile.
	AllowedSkills []string          `json:"allowed_skills"`
	Agentfiles    map[string]string `json:"agentfiles,omitempty"`
}

// JobDirs are the directories of a job's directory, made before the agent
// starts: input/ is read-only once written, the agent's tools write only
// work/ and output/.
var JobDirs = []string{"input", "work", "output", "memory", "logs"}

// JobOutcome is how a job's run ended.
type JobOutcome string

// The outcomes a sandbox reports.
const (
	JobCompleted JobOutcome = "completed"
	JobFailed    JobOutcome = "failed"
	JobCancelled JobOutcome = "cancelled"
)

// FailureCategory classifies a failed job (the spec's categories).
type FailureCategory string

// The failure categories.
const (
	FailureTimeout         FailureCategory = "timeout"
	FailureTokenLimit      FailureCategory = "token_limit"
	FailureMemoryLimit     FailureCategory = "memory_limit"
	FailureRateLimit       FailureCategory = "rate_limit"
	FailureCrash           FailureCategory = "crash"
	FailurePolicyViolation FailureCategory = "policy_violation"
)

// IsolationUnavailable begins the message of a job failed with
// FailurePolicyViolation because the isolation it needs cannot be had where
// it would run (its sandbox, or its launch): nothing of it ran.
const IsolationUnavailable = "Isolation unavailable, so nothing ran: "

// JobFailure says why a job failed.
type JobFailure struct {
	Category FailureCategory `json:"category"`
	Message  string          `json:"message"`
}

// JobReport is how a job went (StatusReport.Job): its outcome, the tokens
// it used and the files of output/ and the log, uploaded to the keys named.
type JobReport struct {
	Outcome    JobOutcome  `json:"outcome"`
	Failure    *JobFailure `json:"failure,omitempty"`
	TokensUsed int64       `json:"tokens_used"`
	Outputs    []JobFile   `json:"outputs,omitempty"`
	Log        *JobFile    `json:"log,omitempty"`
}

// JobFile is one uploaded file of a job: its path in the job directory
// (output/report.md), the object key it was uploaded to, its size and SHA-256.
type JobFile struct {
	Path      string `json:"path"`
	Key       string `json:"key"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

// JobUploads is the Tool of a job sandbox's UploadsRequest: the files of
// its output/ and its log, each by its path in the job directory
// (output/report.md, logs/job.log; ToolCallID the job id). The platform
// keys them under the job of the sandbox's session, jobs/{job_id}/{path},
// whatever the request says.
const JobUploads = "job"

// JobLogPath is the job's log in its job directory, uploaded as its log.
const JobLogPath = "logs/job.log"

// JobUploadKey is where the platform puts a job's file: path is its path in
// the job directory, checked by the caller (ValidUploadPath, under output/
// or logs/).
func JobUploadKey(jobID, path string) string { return "jobs/" + jobID + "/" + path }
