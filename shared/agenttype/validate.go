package agenttype

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/tasksize"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// Limits of an agent type and its workspace configuration.
const (
	MaxNameBytes         = 128
	MaxTools             = 32
	MaxSetupCommands     = 20
	MaxSetupCommandBytes = 4096
	MaxURLBytes          = 2048
	MaxBranchBytes       = 255
	MaxBaseImageBytes    = 512
	DefaultSetupTimeout  = 300
	MaxSetupTimeout      = 3600
	MaxWarmPoolSize      = 100
	// MaxCheckpointRetentionDays bounds checkpoint_retention_days.
	MaxCheckpointRetentionDays = 365
	// MaxSecrets bounds the secrets a type names.
	MaxSecrets = 32
	// MaxLimitSeconds bounds a session limit's seconds (30 days).
	MaxLimitSeconds       = registry.MaxLimitSeconds
	maxToolNameBytes      = 64
	maxResourceLimitBytes = 16
)

var (
	idPattern        = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	toolNamePattern  = regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)
	branchPattern    = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
	baseImagePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$`)
)

// ValidID reports whether id can name an agent type: 1-63 lower-case letters,
// digits, '_' or '-', starting with a letter or digit.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func invalid(format string, args ...any) *apierror.Error {
	return apierror.New(apierror.InvalidRequest, format, args...)
}

// Validate checks a workspace configuration as written, against the platform
// defaults d for the resource limits it leaves out, and returns it as stored:
// limits written as tasksize writes them, tools without repeats, empty lists
// rather than none, the defaults of checkout_on_start and the setup timeout
// filled in. Every error is
// invalid_request; unknown tools carry details.invalid_tools and
// details.valid_tools.
func Validate(c registry.WorkspaceConfig, d registry.ResourceLimits) (registry.WorkspaceConfig, error) {
	return ValidateWith(c, d, nil)
}

// ValidateWith is Validate, where a fixed repository may also be an http or
// git URL of one of insecureHosts (the operator's git_insecure_hosts).
func ValidateWith(c registry.WorkspaceConfig, d registry.ResourceLimits, insecureHosts []string) (registry.WorkspaceConfig, error) {
	var err error
	if c.RepoSource, err = validateRepo(c.RepoSource, insecureHosts); err != nil {
		return registry.WorkspaceConfig{}, err
	}
	if c.Tools, err = validateTools(c.Tools); err != nil {
		return registry.WorkspaceConfig{}, err
	}
	if c.ResourceLimits, err = validateLimits(c.ResourceLimits, d); err != nil {
		return registry.WorkspaceConfig{}, err
	}
	if len(c.SetupCommands) > MaxSetupCommands {
		return registry.WorkspaceConfig{}, invalid("setup_commands holds at most %d commands.", MaxSetupCommands)
	}
	for i, cmd := range c.SetupCommands {
		if strings.TrimSpace(cmd) == "" || len(cmd) > MaxSetupCommandBytes || !utf8.ValidString(cmd) || strings.ContainsRune(cmd, 0) {
			return registry.WorkspaceConfig{}, invalid("setup_commands[%d] must be a command of 1 to %d bytes of UTF-8.", i, MaxSetupCommandBytes)
		}
	}
	if c.SetupCommands == nil {
		c.SetupCommands = []string{}
	}
	if c.CheckoutOnStart == nil {
		c.CheckoutOnStart = new(true)
	}
	switch {
	case c.SetupTimeoutSeconds == 0:
		c.SetupTimeoutSeconds = DefaultSetupTimeout
	case c.SetupTimeoutSeconds < 0 || c.SetupTimeoutSeconds > MaxSetupTimeout:
		return registry.WorkspaceConfig{}, invalid("setup_timeout_seconds must be from 1 to %d (default %d).", MaxSetupTimeout, DefaultSetupTimeout)
	}
	if c.WarmPoolSize < 0 || c.WarmPoolSize > MaxWarmPoolSize {
		return registry.WorkspaceConfig{}, invalid("warm_pool_size must be from 0 to %d.", MaxWarmPoolSize)
	}
	if l := c.SessionLimits; l != nil {
		if p := l.Problem("session_limits."); p != "" {
			return registry.WorkspaceConfig{}, invalid("%s", p)
		}
	}
	if c.Egress, err = validateEgress(c.Egress); err != nil {
		return registry.WorkspaceConfig{}, err
	}
	if c.Secrets, err = validateSecrets(c.Secrets); err != nil {
		return registry.WorkspaceConfig{}, err
	}
	switch c.OnIdle {
	case "":
		c.OnIdle = registry.OnIdleEnd
	case registry.OnIdleEnd, registry.OnIdlePause:
	default:
		return registry.WorkspaceConfig{}, invalid("on_idle must be end or pause.")
	}
	switch {
	case c.CheckpointRetentionDays == 0:
		c.CheckpointRetentionDays = registry.DefaultCheckpointRetentionDays
	case c.CheckpointRetentionDays < 0 || c.CheckpointRetentionDays > MaxCheckpointRetentionDays:
		return registry.WorkspaceConfig{}, invalid("checkpoint_retention_days must be from 1 to %d (default %d).", MaxCheckpointRetentionDays, registry.DefaultCheckpointRetentionDays)
	}
	if c.BaseImage != "" && (len(c.BaseImage) > MaxBaseImageBytes || !baseImagePattern.MatchString(c.BaseImage)) {
		return registry.WorkspaceConfig{}, invalid("base_image must be a container image reference of at most %d bytes, like public.ecr.aws/docker/library/node:22.", MaxBaseImageBytes)
	}
	return c, nil
}

// validateEgress checks an egress policy; none is egress.Default (a type
// written without one reaches the platform only).
func validateEgress(p *egress.Policy) (*egress.Policy, error) {
	if p == nil {
		d := egress.Default()
		return &d, nil
	}
	if problem := p.Problem("egress."); problem != "" {
		return nil, invalid("%s See egress.mode (open, allowlist, none) and egress.allow (hosts, *.domains, IPs or CIDRs, each with an optional :port, or presets: preset:npm, preset:go, preset:apt, preset:pypi, preset:github).", problem)
	}
	out := egress.Policy{Mode: p.Mode, Allow: slices.Compact(slices.Clone(p.Allow))}
	if out.Allow == nil {
		out.Allow = []string{}
	}
	return &out, nil
}

// validateSecrets checks the names of the secrets a type uses, without
// repeats (nil: none).
func validateSecrets(names []string) ([]string, error) {
	if len(names) > MaxSecrets {
		return nil, invalid("secrets names at most %d secrets.", MaxSecrets)
	}
	var out []string
	for i, n := range names {
		if !registry.ValidSecretName(n) {
			return nil, invalid("secrets[%d] must be a secret's name: 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit.", i)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// validateRepo checks a repository source: its type, a URL for fixed (https,
// or http and git to insecureHosts; without credentials), a branch that is a
// branch name.
func validateRepo(r registry.RepoSource, insecureHosts []string) (registry.RepoSource, error) {
	if r.Type == "" && r.URL == "" && r.Branch == "" {
		return registry.RepoSource{Type: registry.RepoNone}, nil
	}
	switch r.Type {
	case registry.RepoTaskContext, registry.RepoNone:
		if r.URL != "" {
			return r, invalid("repo_source.url is only for repo_source.type fixed.")
		}
	case registry.RepoFixed:
		if err := checkRepoURL(r.URL, insecureHosts); err != nil {
			return r, err
		}
	default:
		return r, invalid("repo_source.type must be task_context, fixed or none.")
	}
	if r.Type == registry.RepoNone && r.Branch != "" {
		return r, invalid("repo_source.branch is not for repo_source.type none: it clones nothing.")
	}
	if r.Branch != "" && !validBranch(r.Branch) {
		return r, invalid("repo_source.branch must be a branch name of at most %d bytes (letters, digits, '.', '_', '-', '/'; not starting with '-').", MaxBranchBytes)
	}
	return r, nil
}

// checkRepoURL accepts an https URL of a host, without credentials, query or
// fragment; plain http and git, and internal hosts (loopback, private,
// link-local…), to the hosts an operator lists only
// (sandboxwire.CheckCloneURL); file: and ext:: never.
func checkRepoURL(raw string, insecureHosts []string) error {
	if raw == "" {
		return invalid("repo_source.url is required for repo_source.type fixed.")
	}
	if len(raw) > MaxURLBytes {
		return invalid("repo_source.url must be at most %d bytes.", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "git") && u.User == nil {
		if err := sandboxwire.CheckCloneURL(raw, insecureHosts); err != nil {
			return invalid("repo_source.url %s.", err)
		}
		return nil
	}
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return invalid("repo_source.url must be an https URL of a repository, like https://github.com/org/repo.")
	}
	if u.User != nil {
		return invalid("repo_source.url must not carry credentials.")
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, " \t\r\n") {
		return invalid("repo_source.url must have no query, fragment or spaces.")
	}
	if err := sandboxwire.CheckCloneURL(raw, insecureHosts); err != nil {
		return invalid("repo_source.url %s.", err) // an internal host, and the rest of what a clone refuses
	}
	return nil
}

// validBranch is git's rule for a branch name, as far as a clone needs it:
// never an option, no "..", no empty or hidden component, no ".lock" end.
func validBranch(b string) bool {
	if len(b) > MaxBranchBytes || !branchPattern.MatchString(b) || strings.HasPrefix(b, "-") ||
		strings.Contains(b, "..") || strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") {
		return false
	}
	for _, part := range strings.Split(b, "/") {
		if part == "" || strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// validateTools checks the tool names against the workspace tools, listing
// every unknown one and the valid ones.
func validateTools(tools []string) ([]string, error) {
	if len(tools) > MaxTools {
		return nil, invalid("tools holds at most %d names.", MaxTools)
	}
	out := []string{}
	var unknown []string
	for i, name := range tools {
		// A name that cannot be a tool's is not repeated back.
		if len(name) > maxToolNameBytes || !toolNamePattern.MatchString(name) {
			return nil, invalid("tools[%d] is not a tool name (at most %d lower-case letters, digits, '_' or '.').", i, maxToolNameBytes)
		}
		switch {
		case !toolspec.IsWorkspaceTool(name):
			if !slices.Contains(unknown, name) {
				unknown = append(unknown, name)
			}
		case !slices.Contains(out, name):
			out = append(out, name)
		}
	}
	if len(unknown) > 0 {
		valid := toolspec.WorkspaceTools()
		e := invalid("Unknown tools: %s. Valid tools: %s.", strings.Join(unknown, ", "), strings.Join(valid, ", "))
		e.Details = map[string]any{"invalid_tools": unknown, "valid_tools": valid}
		return nil, e
	}
	return out, nil
}

// validateLimits checks each limit set, and that with the defaults d for the
// others they are a size a Fargate task can have.
func validateLimits(l, d registry.ResourceLimits) (registry.ResourceLimits, error) {
	if len(l.CPU) > maxResourceLimitBytes || len(l.Memory) > maxResourceLimitBytes || len(l.Disk) > maxResourceLimitBytes {
		return l, invalid("resource_limits values are at most %d bytes.", maxResourceLimitBytes)
	}
	var out registry.ResourceLimits
	eff := d
	if l.CPU != "" {
		units, err := tasksize.ParseCPU(l.CPU)
		if err != nil {
			return l, invalid("resource_limits.%s.", err)
		}
		out.CPU, eff.CPU = tasksize.FormatCPU(units), tasksize.FormatCPU(units)
	}
	if l.Memory != "" {
		mib, err := tasksize.ParseMemory(l.Memory)
		if err != nil {
			return l, invalid("resource_limits.%s.", err)
		}
		out.Memory, eff.Memory = tasksize.FormatMemory(mib), tasksize.FormatMemory(mib)
	}
	if l.Disk != "" {
		gib, err := tasksize.ParseDisk(l.Disk)
		if err != nil {
			return l, invalid("resource_limits.%s.", err)
		}
		out.Disk = tasksize.FormatDisk(gib)
	}
	if l.CPU != "" || l.Memory != "" {
		if err := checkSize(eff); err != nil {
			return l, invalid("resource_limits: %s (a Fargate task's sizes; an unset part is the default, %s vCPU and %s).", err, d.CPU, d.Memory)
		}
	}
	return out, nil
}

func checkSize(l registry.ResourceLimits) error {
	cpu, err := tasksize.ParseCPU(l.CPU)
	if err != nil {
		return err
	}
	mem, err := tasksize.ParseMemory(l.Memory)
	if err != nil {
		return err
	}
	return tasksize.Check(cpu, mem)
}

// Effective returns c's resource limits with d's for the parts c leaves
// out: what a session of the type gets.
func Effective(l, d registry.ResourceLimits) registry.ResourceLimits {
	if l.CPU == "" {
		l.CPU = d.CPU
	}
	if l.Memory == "" {
		l.Memory = d.Memory
	}
	if l.Disk == "" {
		l.Disk = d.Disk
	}
	return l
}

// checkName checks an agent type's display name.
func checkName(name string) error {
	if strings.TrimSpace(name) == "" || len(name) > MaxNameBytes || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return invalid("name is required: at most %d bytes of UTF-8, no control characters.", MaxNameBytes)
	}
	return nil
}

// checkID checks an agent type id from a request, never echoing a bad one.
func checkID(id string) error {
	if !ValidID(id) {
		return invalid("id must be 1 to 63 lower-case letters, digits, '_' or '-', starting with a letter or digit.")
	}
	return nil
}
