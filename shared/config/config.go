// Package config reads a platform process's configuration once (Load): the
// remote_agents section of config.yaml, decoded strictly, with environment
// overrides so a Lambda function needs no file, and the deployment's settings
// (Platform: resources, queues, gateway, Fargate), each from one table of
// variables.
//
//	remote_agents:
//	  allowed_origins: []            # RA_ALLOWED_ORIGINS=a,b
//	  embed_features:                # RA_EMBED_FEATURES=file_upload,voice_mic
//	    file_upload: false
//	    context_usage: false
//	    voice_mic: false
//	  creation_timeout_seconds: 15   # RA_CREATION_TIMEOUT_SECONDS
//	  public_base_url: ""            # RA_PUBLIC_BASE_URL
//	  guardrails_path: data/platform-guardrails.md   # RA_GUARDRAILS_PATH (a path or s3://bucket/key)
//	  exception_webhook_url: ""      # RA_EXCEPTION_WEBHOOK_URL
//
// Anything wrong (an unknown key, a wrong type, a timeout out of range) is an error
// naming the key, so a bad configuration stops start-up instead of running half-set.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/tasksize"
)

// Limits of the creation timeout. API Gateway ends any request after 30 s, so a
// create must answer (ready or 408) before then.
const (
	DefaultCreationTimeout = 15 * time.Second
	// DefaultCheckpointInterval is how often a sandbox checkpoints.
	DefaultCheckpointInterval = 10 * time.Minute
	MaxCreationTimeout        = 29 * time.Second
)

// DefaultGuardrailsPath is where the guardrails ship.
const DefaultGuardrailsPath = "data/platform-guardrails.md"

// Features are the optional parts of the embed view (one definition, the
// wire's: sessions and sandboxes carry the same flags).
type Features = sandboxwire.Features

// RemoteAgents is the remote_agents section.
type RemoteAgents struct {
	AllowedOrigins  []string
	EmbedFeatures   Features
	CreationTimeout time.Duration
	// CheckpointInterval is how often a sandbox checkpoints between its
	// agent's turns, so that a lost sandbox loses at most that much
	// (RA_CHECKPOINT_INTERVAL_SECONDS; 0: only when paused).
	CheckpointInterval  time.Duration
	PublicBaseURL       string
	GuardrailsPath      string
	ExceptionWebhookURL string
	// WorkspaceDefaults are the resource limits of a workspace whose agent
	// type sets none (or only some): always a size a Fargate task can have.
	WorkspaceDefaults WorkspaceLimits
	// GitInsecureHosts are the hosts a workspace may clone from over plain
	// http or git, and the only internal hosts (loopback, private,
	// link-local) it may clone from at all (git_insecure_hosts,
	// RA_GIT_INSECURE_HOSTS; default loopback); https works with every other
	// host, file: and ext:: with none.
	GitInsecureHosts []string
	// Quotas bound what one app (tenant) may hold or open.
	Quotas Quotas
	// SessionLimits bound each session (an agent type's may be lower): its
	// time, its idle time, its model tokens; 0 is none.
	SessionLimits SessionLimits
}

// WorkspaceLimits are a workspace's CPU (vCPUs), memory and disk, written as
// agent types write them (package tasksize).
type WorkspaceLimits struct {
	CPU    string `yaml:"cpu"`
	Memory string `yaml:"memory"`
	Disk   string `yaml:"disk"`
}

// DefaultWorkspaceLimits are the sandbox task's own size: 1 vCPU, 2G of
// memory, the 20G of disk every Fargate task has.
var DefaultWorkspaceLimits = WorkspaceLimits{CPU: "1", Memory: "2G", Disk: "20G"}

// check reports whether l is a size a Fargate task can have, and writes it
// as tasksize does ("4096M" is "4G").
func (l *WorkspaceLimits) check(name string) error {
	cpu, err := tasksize.ParseCPU(l.CPU)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	mem, err := tasksize.ParseMemory(l.Memory)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	disk, err := tasksize.ParseDisk(l.Disk)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := tasksize.Check(cpu, mem); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	l.CPU, l.Memory, l.Disk = tasksize.FormatCPU(cpu), tasksize.FormatMemory(mem), tasksize.FormatDisk(disk)
	return nil
}

// Defaults returns the spec's defaults: no origins, no features, 15 s.
func Defaults() RemoteAgents {
	return RemoteAgents{
		AllowedOrigins:     []string{},
		CreationTimeout:    DefaultCreationTimeout,
		CheckpointInterval: DefaultCheckpointInterval,
		GuardrailsPath:     DefaultGuardrailsPath,
		WorkspaceDefaults:  DefaultWorkspaceLimits,
		GitInsecureHosts:   slices.Clone(sandboxwire.DefaultInsecureGitHosts),
		Quotas:             DefaultQuotas,
		SessionLimits:      DefaultSessionLimits,
	}
}

// Load reads the file named by RA_CONFIG (which must exist if set), else
// ./config.yaml if present, then applies the environment overrides.
func Load() (Platform, error) {
	path, explicit := os.LookupEnv("RA_CONFIG")
	if !explicit || path == "" {
		path = "config.yaml"
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && !explicit:
		data = nil
	default:
		return Platform{}, fmt.Errorf("config: read %s: %w", path, err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse builds the configuration from a file's content (nil for none) and the
// environment lookup.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (Platform, error) {
	c := PlatformDefaults()
	if len(data) > 0 {
		if err := c.parseFile(data); err != nil {
			return Platform{}, fmt.Errorf("config: %s: %w", name, err)
		}
	}
	if err := c.applyEnv(lookup); err != nil {
		return Platform{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// file is config.yaml: the remote_agents section; other top-level sections
// belong to other parts of the system.
type file struct {
	RemoteAgents *section       `yaml:"remote_agents"`
	Others       map[string]any `yaml:",inline"`
}

// section is the remote_agents section as written; nil means absent.
type section struct {
	AllowedOrigins         *[]string `yaml:"allowed_origins"`
	EmbedFeatures          *features `yaml:"embed_features"`
	CreationTimeoutSeconds *int      `yaml:"creation_timeout_seconds"`
	PublicBaseURL          *string   `yaml:"public_base_url"`
	GuardrailsPath         *string   `yaml:"guardrails_path"`
	ExceptionWebhookURL    *string   `yaml:"exception_webhook_url"`
	WorkspaceDefaults      *limits   `yaml:"workspace_defaults"`
	GitInsecureHosts       *[]string `yaml:"git_insecure_hosts"`
	Quotas                 *quotas   `yaml:"quotas"`
	SessionLimits          *limitsIn `yaml:"session_limits"`
}

// SessionLimits bound each session; a zero part is none.
type SessionLimits struct {
	MaxSessionSeconds  int   // session_limits.max_session_seconds, RA_MAX_SESSION_SECONDS
	IdleTimeoutSeconds int   // session_limits.idle_timeout_seconds, RA_IDLE_TIMEOUT_SECONDS
	MaxTokens          int64 // session_limits.max_tokens, RA_MAX_SESSION_TOKENS
	// MaxCostUSD: session_limits.max_cost_usd, RA_MAX_SESSION_COST_USD.
	MaxCostUSD float64
	// MaxCostUSDPerDay bounds each app's model spend a UTC day (over it,
	// create is 429 budget_exceeded): session_limits.max_cost_usd_per_day,
	// RA_MAX_COST_USD_PER_DAY.
	MaxCostUSDPerDay float64
	// MaxCostUSDPerMonth bounds it a UTC month:
	// session_limits.max_cost_usd_per_month, RA_MAX_COST_USD_PER_MONTH.
	MaxCostUSDPerMonth float64
	// PriceTablePath is the price table model calls are costed by
	// (session_limits.price_table_path, RA_PRICE_TABLE); "" the shipped
	// one (data/model-prices.json).
	PriceTablePath string
}

// DefaultSessionLimits: a day at most, an hour idle at most, tokens unbounded.
var DefaultSessionLimits = SessionLimits{MaxSessionSeconds: 24 * 3600, IdleTimeoutSeconds: 3600}

// MaxLimitSeconds bounds a session limit's seconds (30 days).
const MaxLimitSeconds = 30 * 24 * 3600

// limitsIn are SessionLimits as written: a part left out keeps its default.
type limitsIn struct {
	MaxSessionSeconds  *int     `yaml:"max_session_seconds"`
	IdleTimeoutSeconds *int     `yaml:"idle_timeout_seconds"`
	MaxTokens          *int64   `yaml:"max_tokens"`
	MaxCostUSD         *float64 `yaml:"max_cost_usd"`
	MaxCostUSDPerDay   *float64 `yaml:"max_cost_usd_per_day"`
	MaxCostUSDPerMonth *float64 `yaml:"max_cost_usd_per_month"`
	PriceTablePath     *string  `yaml:"price_table_path"`
}

// MaxUSD bounds a cap in USD (a setting's, a type's, an app key's): past it
// a cap would bound nothing, and its millionths would no longer fit the
// spend counters.
const MaxUSD = 1_000_000_000

// ValidUSD reports whether v is a cap in USD: 0 (none) to MaxUSD.
func ValidUSD(v float64) bool { return v >= 0 && v <= MaxUSD && !math.IsNaN(v) }

// CostUSD reads a cost bound: 0 (none) to MaxUSD.
func CostUSD(name string, v float64) (float64, error) {
	if !ValidUSD(v) {
		return 0, fmt.Errorf("%s: want 0 (none) or a positive number of USD up to %d, got %v", name, MaxUSD, v)
	}
	return v, nil
}

// LimitSeconds reads a session limit's seconds: 0 (none) to MaxLimitSeconds.
func LimitSeconds(name string, v int) (int, error) {
	if v < 0 || v > MaxLimitSeconds {
		return 0, fmt.Errorf("%s: want a whole number of seconds from 0 (none) to %d, got %d", name, MaxLimitSeconds, v)
	}
	return v, nil
}

// Quotas bound what one app (tenant) may hold or open at once; past one,
// the call is 429 quota_exceeded with the seconds to retry after.
type Quotas struct {
	// ConcurrentSessions: live agents per app (quotas.concurrent_sessions,
	// RA_QUOTA_CONCURRENT_SESSIONS).
	ConcurrentSessions int
	// CreatesPerMinute: creates per app per clock minute
	// (quotas.creates_per_minute, RA_QUOTA_CREATES_PER_MINUTE).
	CreatesPerMinute int
	// StreamsPerSession: open event streams per agent
	// (quotas.streams_per_session, RA_QUOTA_STREAMS_PER_SESSION).
	StreamsPerSession int
	// UploadsPerSession: presigned upload URLs granted per agent over its
	// life, the embed view's attachments and its tools' files together
	// (quotas.uploads_per_session, RA_QUOTA_UPLOADS_PER_SESSION).
	UploadsPerSession int
	// UploadGiBPerSession: the bytes those URLs may carry, in GiB
	// (quotas.upload_gib_per_session, RA_QUOTA_UPLOAD_GIB_PER_SESSION).
	UploadGiBPerSession int
	// AgentTypes: agent types per app (quotas.agent_types,
	// RA_QUOTA_AGENT_TYPES).
	AgentTypes int
	// WarmSandboxes: warm pool sandboxes one app's types may keep together
	// (quotas.warm_sandboxes, RA_QUOTA_WARM_SANDBOXES); 0: ConcurrentSessions.
	WarmSandboxes int
}

// PoolQuota is the warm pool sandboxes an app's types may keep together.
func (q Quotas) PoolQuota() int { return cmp.Or(q.WarmSandboxes, q.ConcurrentSessions) }

// DefaultQuotas are the quotas of a platform that sets none.
var DefaultQuotas = Quotas{ConcurrentSessions: 100, CreatesPerMinute: 60, StreamsPerSession: 10, UploadsPerSession: 1000, UploadGiBPerSession: 50, AgentTypes: 100}

// MaxQuota bounds each quota.
const MaxQuota = 100000

// quotas are Quotas as written: a part left out keeps its default.
type quotas struct {
	ConcurrentSessions *int `yaml:"concurrent_sessions"`
	CreatesPerMinute   *int `yaml:"creates_per_minute"`
	StreamsPerSession  *int `yaml:"streams_per_session"`
	UploadsPerSession  *int `yaml:"uploads_per_session"`
	UploadGiB          *int `yaml:"upload_gib_per_session"`
	AgentTypes         *int `yaml:"agent_types"`
	WarmSandboxes      *int `yaml:"warm_sandboxes"`
}

// Quota reads one quota: a whole number from 1 to MaxQuota.
func Quota(name string, v int) (int, error) {
	if v < 1 || v > MaxQuota {
		return 0, fmt.Errorf("%s: want a whole number from 1 to %d, got %d", name, MaxQuota, v)
	}
	return v, nil
}

// limits are WorkspaceLimits as written: a part left out keeps its default.
type limits struct {
	CPU    *string `yaml:"cpu"`
	Memory *string `yaml:"memory"`
	Disk   *string `yaml:"disk"`
}

// parseFile decodes data strictly (no unknown key in the section, every value
// of its type) and applies what it sets.
func (c *RemoteAgents) parseFile(data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	if len(root.Content) == 0 {
		return nil
	}
	if root.Content[0].Kind != yaml.MappingNode {
		return errors.New("want a mapping at the top level")
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return describe(err, root.Content[0])
	}
	if f.RemoteAgents == nil {
		return nil
	}
	return c.apply(*f.RemoteAgents)
}

func (c *RemoteAgents) apply(s section) error {
	const prefix = "remote_agents."
	var err error
	if s.AllowedOrigins != nil {
		if c.AllowedOrigins, err = Origins(prefix+"allowed_origins", *s.AllowedOrigins); err != nil {
			return err
		}
	}
	if s.EmbedFeatures != nil {
		c.EmbedFeatures = Features(*s.EmbedFeatures)
	}
	if s.CreationTimeoutSeconds != nil {
		if c.CreationTimeout, err = timeout(prefix+"creation_timeout_seconds", *s.CreationTimeoutSeconds); err != nil {
			return err
		}
	}
	if v := s.PublicBaseURL; v != nil && *v != "" {
		if err := checkBaseURL(prefix+"public_base_url", *v); err != nil {
			return err
		}
		c.PublicBaseURL = *v
	}
	if v := s.GuardrailsPath; v != nil {
		if strings.TrimSpace(*v) == "" {
			return fmt.Errorf("%sguardrails_path: must not be empty", prefix)
		}
		c.GuardrailsPath = *v
	}
	if v := s.ExceptionWebhookURL; v != nil && *v != "" {
		if err := checkBaseURL(prefix+"exception_webhook_url", *v); err != nil {
			return err
		}
		c.ExceptionWebhookURL = *v
	}
	if l := s.WorkspaceDefaults; l != nil {
		for _, part := range []struct {
			v   *string
			out *string
		}{{l.CPU, &c.WorkspaceDefaults.CPU}, {l.Memory, &c.WorkspaceDefaults.Memory}, {l.Disk, &c.WorkspaceDefaults.Disk}} {
			if part.v != nil {
				*part.out = strings.TrimSpace(*part.v)
			}
		}
		if err := c.WorkspaceDefaults.check(prefix + "workspace_defaults"); err != nil {
			return err
		}
	}
	if v := s.GitInsecureHosts; v != nil {
		if c.GitInsecureHosts, err = insecureHosts(prefix+"git_insecure_hosts", *v); err != nil {
			return err
		}
	}
	if l := s.SessionLimits; l != nil {
		if l.MaxSessionSeconds != nil {
			if c.SessionLimits.MaxSessionSeconds, err = LimitSeconds(prefix+"session_limits.max_session_seconds", *l.MaxSessionSeconds); err != nil {
				return err
			}
		}
		if l.IdleTimeoutSeconds != nil {
			if c.SessionLimits.IdleTimeoutSeconds, err = LimitSeconds(prefix+"session_limits.idle_timeout_seconds", *l.IdleTimeoutSeconds); err != nil {
				return err
			}
		}
		if l.MaxTokens != nil {
			if *l.MaxTokens < 0 {
				return fmt.Errorf("%ssession_limits.max_tokens: want 0 (none) or more, got %d", prefix, *l.MaxTokens)
			}
			c.SessionLimits.MaxTokens = *l.MaxTokens
		}
		if l.MaxCostUSD != nil {
			if c.SessionLimits.MaxCostUSD, err = CostUSD(prefix+"session_limits.max_cost_usd", *l.MaxCostUSD); err != nil {
				return err
			}
		}
		if l.MaxCostUSDPerDay != nil {
			if c.SessionLimits.MaxCostUSDPerDay, err = CostUSD(prefix+"session_limits.max_cost_usd_per_day", *l.MaxCostUSDPerDay); err != nil {
				return err
			}
		}
		if l.MaxCostUSDPerMonth != nil {
			if c.SessionLimits.MaxCostUSDPerMonth, err = CostUSD(prefix+"session_limits.max_cost_usd_per_month", *l.MaxCostUSDPerMonth); err != nil {
				return err
			}
		}
		if l.PriceTablePath != nil {
			c.SessionLimits.PriceTablePath = strings.TrimSpace(*l.PriceTablePath)
		}
	}
	if q := s.Quotas; q != nil {
		for _, part := range []struct {
			name string
			v    *int
			out  *int
		}{{"concurrent_sessions", q.ConcurrentSessions, &c.Quotas.ConcurrentSessions}, {"creates_per_minute", q.CreatesPerMinute, &c.Quotas.CreatesPerMinute},
			{"streams_per_session", q.StreamsPerSession, &c.Quotas.StreamsPerSession}, {"uploads_per_session", q.UploadsPerSession, &c.Quotas.UploadsPerSession},
			{"upload_gib_per_session", q.UploadGiB, &c.Quotas.UploadGiBPerSession}, {"agent_types", q.AgentTypes, &c.Quotas.AgentTypes},
			{"warm_sandboxes", q.WarmSandboxes, &c.Quotas.WarmSandboxes}} {
			if part.v != nil && part.name == "warm_sandboxes" && *part.v == 0 {
				*part.out = 0 // as many as the live quota
			} else if part.v != nil {
				if *part.out, err = Quota(prefix+"quotas."+part.name, *part.v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// describe turns the decoder's errors into ones that name the key, as the
// file spells it (remote_agents.embed_features.camera), and say what it wants.
func describe(err error, root *yaml.Node) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	msg := te.Errors[0]
	line := 0
	_, _ = fmt.Sscanf(msg, "line %d:", &line)
	path := keyAt(root, line, "")
	switch {
	case strings.Contains(msg, "not found in type"):
		if strings.HasPrefix(path, "remote_agents.embed_features.") {
			return fmt.Errorf("%s: unknown feature (line %d)", path, line)
		}
		return fmt.Errorf("%s: unknown key (line %d)", path, line)
	case strings.HasSuffix(msg, "into int"):
		return fmt.Errorf("%s: want a whole number (line %d)", path, line)
	case strings.HasSuffix(msg, "into bool"):
		return fmt.Errorf("%s: want true or false (line %d)", path, line)
	case strings.HasSuffix(msg, "into []string"):
		return fmt.Errorf("%s: want a list of strings (line %d)", path, line)
	case strings.HasSuffix(msg, "into string"):
		return fmt.Errorf("%s: want a string (line %d)", path, line)
	default:
		return fmt.Errorf("%s: want a mapping (line %d)", path, line)
	}
}

// keyAt is the dotted path of the deepest key on line, or of whose value
// starts there.
func keyAt(n *yaml.Node, line int, prefix string) string {
	if n.Kind != yaml.MappingNode {
		return prefix
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if k.Line == line || v.Line == line {
			if v.Kind == yaml.MappingNode && v.Line != line {
				return path
			}
			if deeper := keyAt(v, line, path); deeper != path {
				return deeper
			}
			return path
		}
		if v.Kind == yaml.MappingNode && v.Line < line {
			if deeper := keyAt(v, line, path); deeper != path {
				return deeper
			}
		}
	}
	return prefix
}

// features are Features as the file spells them; a conversion keeps the two
// in step.
type features struct {
	FileUpload   bool `yaml:"file_upload"`
	ContextUsage bool `yaml:"context_usage"`
	VoiceMic     bool `yaml:"voice_mic"`
}

// featureNames maps each feature's configuration name to its field.
var featureNames = map[string]func(*Features) *bool{
	"file_upload":   func(f *Features) *bool { return &f.FileUpload },
	"context_usage": func(f *Features) *bool { return &f.ContextUsage },
	"voice_mic":     func(f *Features) *bool { return &f.VoiceMic },
}

func timeout(name string, secs int) (time.Duration, error) {
	d := time.Duration(secs) * time.Second
	if d < time.Second || d > MaxCreationTimeout {
		return 0, fmt.Errorf("%s: %d seconds is outside 1..%d", name, secs, int(MaxCreationTimeout/time.Second))
	}
	return d, nil
}

func splitList(v string) []string {
	out := []string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// origins accepts "scheme://host[:port]" origins and returns them as browsers send
// them in the Origin header: lower-case, without a trailing slash.
// Origins checks a list of origins (scheme://host[:port]) and returns them as
// browsers send them in Origin (lower case, no trailing slash); name is the
// setting's name in the error. The handlers and the stack's CORS rules both
// take allowed_origins through it, so they agree.
func Origins(name string, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for i, o := range list {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("%s[%d]: %q is not an origin like https://app.example.com", name, i, o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

func checkBaseURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", name, v)
	}
	return nil
}

// insecureHosts checks the hosts an operator lets workspaces clone from over
// plain http or git: host names or IP addresses, lower-cased.
func insecureHosts(name string, hosts []string) ([]string, error) {
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if !sandboxwire.InsecureHost(h) {
			return nil, fmt.Errorf("%s: %q is not a host name or IP address", name, h)
		}
		out = append(out, h)
	}
	return out, nil
}
