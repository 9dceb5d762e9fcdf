package job

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Profile is an agent profile (the spec's agents table): who runs a job.
type Profile struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Level       string  `json:"agent_level"`
	Provider    string  `json:"llm_provider"`
	Model       string  `json:"llm_model"`
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
	// AllowedSkills are the tools the job's agent gets: workspace tools of
	// the tool registry (toolspec), or names of Agentfiles.
	AllowedSkills []string `json:"allowed_skills"`
	// Agentfiles are named Agentfiles stored with the profile.
	Agentfiles map[string]string `json:"agentfiles,omitempty"`
	// WarmPoolSize is how many idle sandboxes are kept for the profile's
	// jobs (PoolType): a job of it without a memory constraint starts in
	// one of them.
	WarmPoolSize int       `json:"warm_pool_size"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// ProfileInput is the body of PUT /internal/agents/{id}.
type ProfileInput struct {
	Name          string            `json:"name"`
	Level         string            `json:"agent_level"`
	Provider      string            `json:"llm_provider"`
	Model         string            `json:"llm_model"`
	MaxTokens     int               `json:"max_tokens"`
	Temperature   *float64          `json:"temperature"`
	AllowedSkills []string          `json:"allowed_skills"`
	Agentfiles    map[string]string `json:"agentfiles"`
	WarmPoolSize  int               `json:"warm_pool_size"`
}

// Levels are the agent levels.
var Levels = []string{"L0", "L1", "L2"}

// Providers are the model providers a profile may name; ProviderScripted only
// on the dev stack.
var Providers = []string{"openai", "anthropic", "mistral", "local", "bedrock"}

// ProviderScripted runs a scripted model (RA_LLM_SCRIPT): dev stack only.
const ProviderScripted = "scripted"

// DefaultTemperature is a profile's temperature unless it says otherwise.
const DefaultTemperature = 0.2

// Bounds of a profile.
const (
	MaxNameBytes       = 200
	MaxModelBytes      = 200
	MaxProfileTokens   = 1_000_000
	MaxSkills          = 64
	MaxAgentfiles      = 16
	MaxAgentfileBytes  = 32 * 1024
	MaxWarmPoolSize    = 100
	maxSkillNameLength = 64
)

var skillName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// Validate checks in and returns what is wrong, "" when nothing; scripted
// allows ProviderScripted.
func (in ProfileInput) Validate(scripted bool) string {
	switch {
	case strings.TrimSpace(in.Name) == "" || len(in.Name) > MaxNameBytes:
		return fmt.Sprintf("name must be 1 to %d bytes.", MaxNameBytes)
	case !slices.Contains(Levels, in.Level):
		return "agent_level must be L0, L1 or L2."
	case !slices.Contains(Providers, in.Provider) && (!scripted || in.Provider != ProviderScripted):
		allowed := strings.Join(Providers, ", ")
		if scripted {
			allowed += ", " + ProviderScripted
		}
		return "llm_provider must be one of " + allowed + "."
	case strings.TrimSpace(in.Model) == "" || len(in.Model) > MaxModelBytes:
		return fmt.Sprintf("llm_model must be 1 to %d bytes.", MaxModelBytes)
	case in.MaxTokens < 1 || in.MaxTokens > MaxProfileTokens:
		return fmt.Sprintf("max_tokens must be 1 to %d.", MaxProfileTokens)
	case in.Temperature != nil && (*in.Temperature < 0 || *in.Temperature > 2):
		return "temperature must be 0 to 2."
	case in.AllowedSkills == nil:
		return "allowed_skills is required (an empty list allows no tool)."
	case len(in.AllowedSkills) > MaxSkills:
		return fmt.Sprintf("allowed_skills may name at most %d skills.", MaxSkills)
	case len(in.Agentfiles) > MaxAgentfiles:
		return fmt.Sprintf("agentfiles may hold at most %d files.", MaxAgentfiles)
	case in.WarmPoolSize < 0 || in.WarmPoolSize > MaxWarmPoolSize:
		return fmt.Sprintf("warm_pool_size must be from 0 to %d.", MaxWarmPoolSize)
	}
	for _, name := range slices.Sorted(maps.Keys(in.Agentfiles)) { // in order: the same request, the same error
		body := in.Agentfiles[name]
		if !skillName.MatchString(name) || toolspec.IsWorkspaceTool(name) {
			return fmt.Sprintf("agentfiles: %q is not a valid Agentfile name (lower-case letters, digits, '-' and '_', not a tool's name).", name)
		}
		if len(body) == 0 || len(body) > MaxAgentfileBytes {
			return fmt.Sprintf("agentfiles: %s must be 1 to %d bytes.", name, MaxAgentfileBytes)
		}
	}
	seen := map[string]bool{}
	for _, s := range in.AllowedSkills {
		if seen[s] {
			return fmt.Sprintf("allowed_skills names %q twice.", s)
		}
		seen[s] = true
		if _, ok := in.Agentfiles[s]; !toolspec.IsWorkspaceTool(s) && !ok {
			return fmt.Sprintf("allowed_skills: %q is neither a tool (%s) nor an Agentfile of the profile.", s, strings.Join(toolspec.WorkspaceTools(), ", "))
		}
	}
	return ""
}
