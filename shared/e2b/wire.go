// Package e2b is the wire of the E2B control plane as the E2B SDKs speak
// it (their public OpenAPI document; both the routes before /v2 and after
// it): the bodies of create, connect, timeout and pause, the sandbox as
// they read it, the list's filters, and the error body, whose code field,
// not the HTTP status, the SDKs read.
package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults and bounds of the control plane.
const (
	// DefaultTimeout is a sandbox's life when create or connect says none
	// (seconds).
	DefaultTimeout = 300
	// MaxTimeout bounds a sandbox's life from now (24 h, E2B's Pro limit).
	MaxTimeout = 24 * 60 * 60
	// DefaultTemplate is the template the SDKs create when named none: our
	// default agent type.
	DefaultTemplate = "base"
	// MaxListLimit bounds a list page; DefaultListLimit is its size when
	// unsaid.
	MaxListLimit     = 100
	DefaultListLimit = 100
	// MaxMetadata bounds a sandbox's metadata entries, and
	// MaxMetadataBytes each key and value.
	MaxMetadata      = 64
	MaxMetadataBytes = 1024
	// MaxEnvVars bounds a sandbox's environment variables.
	MaxEnvVars = 256
)

// Sandbox states as the SDKs name them.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// NewSandbox is create's body, before /v2 (POST /sandboxes) and after it
// (POST /v2/sandboxes): 2.45 sends every field, 2.51 only those set.
type NewSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoResume          *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume,omitempty"`
	// Network's AllowPublicTraffic false keeps the sandbox's preview URLs
	// to holders of its traffic access token; the rest of network (egress
	// rules) is not served.
	Network *struct {
		AllowPublicTraffic *bool `json:"allowPublicTraffic,omitempty"`
	} `json:"network,omitempty"`
}

// PrivateTraffic reports whether n keeps its previews to its traffic
// access token (network.allowPublicTraffic false).
func (n NewSandbox) PrivateTraffic() bool {
	return n.Network != nil && n.Network.AllowPublicTraffic != nil && !*n.Network.AllowPublicTraffic
}

// TrafficTokenHeader carries a sandbox's traffic access token to its
// preview URLs.
const TrafficTokenHeader = "E2b-Traffic-Access-Token" //nolint:gosec // a header's name, no credential

// Problem says what is wrong with n ("" nothing), once Normalize ran.
func (n NewSandbox) Problem() string {
	switch {
	case !templatePattern.MatchString(n.TemplateID):
		return "templateID must name an agent type: 1 to 64 letters, digits, '-', '_', '.' or ':'"
	case n.Timeout != nil && (*n.Timeout < 1 || *n.Timeout > MaxTimeout):
		return fmt.Sprintf("timeout must be 1 to %d seconds", MaxTimeout)
	case len(n.Metadata) > MaxMetadata:
		return fmt.Sprintf("metadata holds at most %d entries", MaxMetadata)
	case len(n.EnvVars) > MaxEnvVars:
		return fmt.Sprintf("envVars holds at most %d variables", MaxEnvVars)
	}
	for k, v := range n.Metadata {
		if k == "" || len(k) > MaxMetadataBytes || len(v) > MaxMetadataBytes {
			return fmt.Sprintf("metadata keys are 1 to %d bytes, values at most %d", MaxMetadataBytes, MaxMetadataBytes)
		}
	}
	for k := range n.EnvVars {
		if !envPattern.MatchString(k) {
			return fmt.Sprintf("envVars: %q is not a variable name", k)
		}
	}
	return ""
}

var (
	templatePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	envPattern      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,199}$`)
)

// LifeSeconds is the sandbox's life from now that n asks for.
func (n NewSandbox) LifeSeconds() int {
	if n.Timeout == nil {
		return DefaultTimeout
	}
	return *n.Timeout
}

// ConnectRequest is connect's body (optional in /v2): the life from now it
// asks for, which only ever lengthens the sandbox's.
type ConnectRequest struct {
	Timeout *int `json:"timeout,omitempty"`
}

// TimeoutRequest is set-timeout's body: the sandbox ends that many seconds
// from now (sooner or later than it would have).
type TimeoutRequest struct {
	Timeout int `json:"timeout"`
}

// PauseRequest is pause's body (optional): memory is asked for by 2.45
// and can't be kept on Fargate; the files and the agent's state are.
type PauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// Sandbox is what create and connect answer.
type Sandbox struct {
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// Detail is what get-info and the list answer of a sandbox.
type Detail struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	Alias       string            `json:"alias,omitempty"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	State       string            `json:"state"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata"`
}

// ListFilter is the list's query: metadata entries every sandbox listed
// has, its states (none: running and paused), a page size and a cursor.
type ListFilter struct {
	Metadata  map[string]string
	States    []string
	Limit     int
	NextToken string
}

// ParseListFilter reads the list's query. The SDKs encode metadata three
// times: each key and value, their joining as a query, and the whole as
// this query's value.
func ParseListFilter(q url.Values) (ListFilter, error) {
	f := ListFilter{Limit: DefaultListLimit, NextToken: q.Get("nextToken")}
	if raw := q.Get("metadata"); raw != "" {
		joined, err := url.QueryUnescape(raw)
		if err != nil {
			return f, fmt.Errorf("metadata: %w", err)
		}
		f.Metadata = map[string]string{}
		for pair := range strings.SplitSeq(joined, "&") {
			k, v, _ := strings.Cut(pair, "=")
			key, err1 := url.QueryUnescape(k)
			value, err2 := url.QueryUnescape(v)
			if err1 != nil || err2 != nil || key == "" {
				return f, fmt.Errorf("metadata: %q is not key=value", pair)
			}
			f.Metadata[key] = value
		}
		if len(f.Metadata) > MaxMetadata {
			return f, fmt.Errorf("metadata: at most %d entries", MaxMetadata)
		}
	}
	if raw := q.Get("state"); raw != "" {
		for st := range strings.SplitSeq(raw, ",") {
			if st != StateRunning && st != StatePaused {
				return f, fmt.Errorf("state: %q is neither running nor paused", st)
			}
			if !slices.Contains(f.States, st) {
				f.States = append(f.States, st)
			}
		}
	}
	if raw := q.Get("limit"); raw != "" {
		var n int
		if _, err := fmt.Sscanf(raw, "%d", &n); err != nil || n < 1 || n > MaxListLimit || fmt.Sprint(n) != raw {
			return f, fmt.Errorf("limit must be 1 to %d", MaxListLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// Matches reports whether a sandbox with metadata md in state st is one f
// lists.
func (f ListFilter) Matches(md map[string]string, st string) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, st) {
		return false
	}
	for k, v := range f.Metadata {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Error is the control plane's error body: the SDKs tell a missing sandbox
// (404) and an already paused one (409) by its code, the HTTP status;
// error_code is the platform's own code.
type Error struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
}

// WriteError writes the error body of status and message.
func WriteError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Error{Code: status, Message: message})
}

// apiKeyPattern is the shape the SDKs before 2.51 require of an API key.
var apiKeyPattern = regexp.MustCompile(`^e2b_[0-9a-f]{40}$`)

// ValidAPIKey reports whether key has the shape of an E2B API key: "e2b_"
// and 40 hex digits.
func ValidAPIKey(key string) bool { return apiKeyPattern.MatchString(key) }
