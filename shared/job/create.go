package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// The mandatory headers of every /internal request (the spec's).
const (
	HeaderIdentity = "x-identity-id"
	HeaderContext  = "x-context-id"
	HeaderCommand  = "x-command-id"
	HeaderPlanStep = "x-plan-step-id"
)

// MandatoryHeaders lists them in the spec's order.
var MandatoryHeaders = []string{HeaderIdentity, HeaderContext, HeaderCommand, HeaderPlanStep}

// Headers are a request's mandatory headers.
type Headers struct {
	IdentityID string
	ContextID  string
	CommandID  string
	PlanStepID string
}

// ReadHeaders reads the mandatory headers with get and returns the names of
// those missing (empty), in the spec's order.
func ReadHeaders(get func(name string) string) (Headers, []string) {
	var h Headers
	var missing []string
	for _, n := range MandatoryHeaders {
		v := strings.TrimSpace(get(n))
		if v == "" {
			missing = append(missing, n)
			continue
		}
		switch n {
		case HeaderIdentity:
			h.IdentityID = v
		case HeaderContext:
			h.ContextID = v
		case HeaderCommand:
			h.CommandID = v
		case HeaderPlanStep:
			h.PlanStepID = v
		}
	}
	return h, missing
}

// CreateRequest is the spec's CreateJobDto.
type CreateRequest struct {
	CommandID   string          `json:"commandId"`
	PlanStepID  string          `json:"planStepId"`
	AgentID     string          `json:"agentId"`
	IdentityID  string          `json:"identityId"`
	ContextID   string          `json:"contextId"`
	TokenLimit  int64           `json:"tokenLimit"`
	InputData   json.RawMessage `json:"inputData"`
	Constraints *Constraints    `json:"constraints,omitempty"`
}

// Bounds of a create request.
const (
	MaxCreateBytes = 256 * 1024
	MaxInputBytes  = 200 * 1024
	MaxTokenLimit  = 10_000_000
	MaxTimeout     = 24 * 60 * 60
	MaxMemoryMiB   = 30 * 1024
	MinMemoryMiB   = 128
)

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ValidUUID reports whether s is a UUID (any version, as class-validator's
// IsUUID accepts).
func ValidUUID(s string) bool { return uuidPattern.MatchString(s) }

// ParseCreate decodes and validates a create body: one JSON object, no
// unknown fields. The message says what is wrong ("" when nothing).
func ParseCreate(body []byte) (CreateRequest, string) {
	var in CreateRequest
	if len(body) > MaxCreateBytes {
		return in, fmt.Sprintf("The request body is larger than %d bytes.", MaxCreateBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, "The body must be a CreateJobDto JSON object without unknown fields: " + jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return in, "The body must be one JSON object."
	}
	for _, f := range []struct{ name, v string }{
		{"commandId", in.CommandID}, {"planStepId", in.PlanStepID}, {"agentId", in.AgentID},
		{"identityId", in.IdentityID}, {"contextId", in.ContextID},
	} {
		if !ValidUUID(f.v) {
			return in, f.name + " must be a UUID."
		}
	}
	if in.TokenLimit < 1 || in.TokenLimit > MaxTokenLimit {
		return in, fmt.Sprintf("tokenLimit must be an integer from 1 to %d.", MaxTokenLimit)
	}
	trimmed := bytes.TrimSpace(in.InputData)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return in, "inputData must be an object."
	}
	if len(trimmed) > MaxInputBytes {
		return in, fmt.Sprintf("inputData may be at most %d bytes.", MaxInputBytes)
	}
	if _, err := sandboxwire.JobInputFiles(trimmed); err != nil {
		return in, err.Error() + "."
	}
	in.InputData = trimmed
	if c := in.Constraints; c != nil {
		if c.Timeout != nil && (*c.Timeout < 1 || *c.Timeout > MaxTimeout) {
			return in, fmt.Sprintf("constraints.timeout must be 1 to %d seconds.", MaxTimeout)
		}
		if c.Memory != nil && (*c.Memory < MinMemoryMiB || *c.Memory > MaxMemoryMiB) {
			return in, fmt.Sprintf("constraints.memory must be %d to %d MiB.", MinMemoryMiB, MaxMemoryMiB)
		}
	}
	return in, ""
}

// Mismatch names the first mandatory header that differs from its body field,
// "" when all match.
func (in CreateRequest) Mismatch(h Headers) string {
	switch {
	case !strings.EqualFold(h.IdentityID, in.IdentityID):
		return HeaderIdentity + " must equal identityId"
	case !strings.EqualFold(h.ContextID, in.ContextID):
		return HeaderContext + " must equal contextId"
	case !strings.EqualFold(h.CommandID, in.CommandID):
		return HeaderCommand + " must equal commandId"
	case !strings.EqualFold(h.PlanStepID, in.PlanStepID):
		return HeaderPlanStep + " must equal planStepId"
	}
	return ""
}

// Hash is the SHA-256 of the request as the service understood it (inputData
// compacted), to tell a replay from another request for the plan step.
func (in CreateRequest) Hash() string {
	var compact bytes.Buffer
	_ = json.Compact(&compact, in.InputData)
	c := in
	c.CommandID, c.PlanStepID, c.AgentID = strings.ToLower(c.CommandID), strings.ToLower(c.PlanStepID), strings.ToLower(c.AgentID)
	c.IdentityID, c.ContextID = strings.ToLower(c.IdentityID), strings.ToLower(c.ContextID)
	c.InputData = compact.Bytes()
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// jsonProblem describes a decoding error without echoing the body.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case asErr(err, &te):
		return fmt.Sprintf("%s has the wrong type.", te.Field)
	case asErr(err, &se):
		return "malformed JSON."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "."
	}
	return "malformed JSON."
}
