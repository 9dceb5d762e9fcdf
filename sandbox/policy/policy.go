// Package policy is the agent's security policy (policy.toml): which tools are
// enabled, which paths they may touch, which commands bash may run, which domains
// the web tools may reach and how often. Deny always wins; with default_deny, only
// what is allowed passes. Paths are resolved, symlinks included, before they are
// checked, so no spelling of a path escapes the rules.
//
//	default_deny = false
//
//	[tools.read]
//	allow = ["$WORKSPACE/**"]
//	deny  = ["**/.env", "~/.ssh/**"]
//
//	[tools.bash]
//	allow = ["go *", "git *", "ls *"]
//	deny  = ["rm -rf *"]
//
//	[tools.web_fetch]
//	allow_domains = ["docs.example.com", "*.github.com"]
//	rate_limit = 30   # requests per minute
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"
)

// FileName is the policy file the agent looks for beside the Agentfile.
const FileName = "policy.toml"

// ErrDenied: the policy refuses the action. The wrapped text says which rule.
var ErrDenied = errors.New("denied by policy")

// Tool is one tool's rules.
type Tool struct {
	Enabled      *bool    `toml:"enabled"`
	Allow        []string `toml:"allow"`
	Deny         []string `toml:"deny"`
	AllowDomains []string `toml:"allow_domains"`
	RateLimit    int      `toml:"rate_limit"`
}

// File is policy.toml as written.
type File struct {
	DefaultDeny bool            `toml:"default_deny"`
	Tools       map[string]Tool `toml:"tools"`
}

// Kinds of tools, by what the policy checks for them.
var (
	pathTools = []string{"read", "write", "edit", "glob", "grep", "ls", "git"}
	webTools  = []string{"web_fetch", "web_search"}
	allTools  = append(append(append([]string{}, pathTools...), webTools...), "bash", "memory_read", "memory_write")
)

// Policy is a loaded policy bound to a workspace.
type Policy struct {
	defaultDeny bool
	tools       map[string]Tool
	workspace   string
	home        string

	mu     sync.Mutex
	recent map[string][]time.Time // web requests per tool, for rate limits
	now    func() time.Time
}

// Defaults: every tool enabled; file tools confined to the workspace; bash
// refuses privilege escalation and whole-disk deletion; web tools need an
// allow_domains list and run at most 30 requests a minute.
func Defaults() File {
	ws := []string{"$WORKSPACE", "$WORKSPACE/**"}
	f := File{Tools: map[string]Tool{}}
	for _, t := range pathTools {
		f.Tools[t] = Tool{Allow: ws}
	}
	f.Tools["bash"] = Tool{Deny: []string{"sudo *", "su *", "su", "rm -rf /", "rm -rf /*", "rm -rf ~*", "mkfs*", "dd *of=/dev/*", "shutdown*", "reboot*"}}
	for _, t := range webTools {
		f.Tools[t] = Tool{RateLimit: 30}
	}
	return f
}

// Load reads a policy file over the defaults: a tool section replaces only the
// keys it sets.
func Load(path, workspace string) (*Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(string(raw), workspace)
}

// LoadOrDefault reads path if it exists, else the defaults.
func LoadOrDefault(path, workspace string) (*Policy, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return New(Defaults(), workspace)
	}
	return Load(path, workspace)
}

// Parse reads policy TOML over the defaults.
func Parse(src, workspace string) (*Policy, error) {
	var f File
	md, err := toml.Decode(src, &f)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("policy: unknown key %s", strings.Join(keys, ", "))
	}
	merged := Defaults()
	merged.DefaultDeny = f.DefaultDeny
	for name, t := range f.Tools {
		if !slices.Contains(allTools, name) {
			return nil, fmt.Errorf("policy: unknown tool %q (known: %s)", name, strings.Join(sorted(allTools), ", "))
		}
		base := merged.Tools[name]
		if t.Enabled != nil {
			base.Enabled = t.Enabled
		}
		if t.Allow != nil {
			base.Allow = t.Allow
		}
		if t.Deny != nil {
			base.Deny = append(base.Deny, t.Deny...)
		}
		if t.AllowDomains != nil {
			base.AllowDomains = t.AllowDomains
		}
		if t.RateLimit != 0 {
			base.RateLimit = t.RateLimit
		}
		merged.Tools[name] = base
	}
	return New(merged, workspace)
}

// New checks f and binds it to workspace.
func New(f File, workspace string) (*Policy, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("policy: workspace: %w", err)
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	home, _ := os.UserHomeDir()
	for name, t := range f.Tools {
		if t.RateLimit < 0 {
			return nil, fmt.Errorf("policy: tools.%s.rate_limit must not be negative", name)
		}
		for _, p := range append(slices.Clone(t.Allow), t.Deny...) {
			if strings.TrimSpace(p) == "" {
				return nil, fmt.Errorf("policy: tools.%s has an empty pattern", name)
			}
		}
		for _, d := range t.AllowDomains {
			if d == "" || strings.ContainsAny(d, "/: ") {
				return nil, fmt.Errorf("policy: tools.%s.allow_domains: %q is not a domain", name, d)
			}
		}
	}
	return &Policy{defaultDeny: f.DefaultDeny, tools: f.Tools, workspace: ws, home: home, recent: map[string][]time.Time{}, now: time.Now}, nil
}

// Workspace returns the resolved workspace folder.
func (p *Policy) Workspace() string { return p.workspace }

// Enabled reports whether tool may be offered to the model at all.
func (p *Policy) Enabled(tool string) bool {
	t, ok := p.tools[tool]
	if !ok {
		return !p.defaultDeny
	}
	return t.Enabled == nil || *t.Enabled
}

func denied(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDenied, fmt.Sprintf(format, args...))
}

// decide applies deny, then allow, then default_deny to a subject.
func (p *Policy) decide(tool, subject string, match func(pattern string) bool) error {
	if !p.Enabled(tool) {
		return denied("tool %s is disabled", tool)
	}
	if err := p.refuse(tool, subject, match); err != nil {
		return err
	}
	t := p.tools[tool]
	for _, pat := range t.Allow {
		if match(pat) {
			return nil
		}
	}
	if len(t.Allow) > 0 || p.defaultDeny {
		return denied("%s: %q is not allowed", tool, subject)
	}
	return nil
}

// refuse applies tool's deny patterns to a subject.
func (p *Policy) refuse(tool, subject string, match func(pattern string) bool) error {
	for _, pat := range p.tools[tool].Deny {
		if match(pat) {
			return denied("%s: %q matches deny pattern %q", tool, subject, pat)
		}
	}
	return nil
}

// CheckPath resolves path (relative to the workspace; symlinks followed, also for
// the existing part of a path yet to be created) and checks it for tool. It
// returns the resolved absolute path to use.
func (p *Policy) CheckPath(tool, path string) (string, error) {
	if path == "" || strings.ContainsRune(path, 0) {
		return "", denied("%s: invalid path", tool)
	}
	resolved, err := p.Resolve(path)
	if err != nil {
		return "", err
	}
	if err := p.decide(tool, resolved, func(pat string) bool { return MatchPath(p.expand(pat), resolved) }); err != nil {
		return "", err
	}
	return resolved, nil
}

// Resolve makes path absolute (relative paths are in the workspace; ~ is home) and
// follows every symlink of its existing part, and a dangling one to where what
// is made through it would be.
func (p *Policy) Resolve(path string) (string, error) {
	path = p.expand(path)
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.workspace, path)
	}
	return resolve(filepath.Clean(path), 0)
}

// maxLinks bounds the dangling links resolve follows (the kernel's is 40).
const maxLinks = 40

func resolve(path string, links int) (string, error) {
	// Follow symlinks of the longest existing prefix, then re-attach the rest.
	existing, rest := path, ""
	for {
		real, err := filepath.EvalSymlinks(existing)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("resolve %s: %w", path, err)
		}
		if target, err := os.Readlink(existing); err == nil {
			// A link to nothing (yet): what is made through it is made where
			// it points.
			if links >= maxLinks {
				return "", fmt.Errorf("resolve %s: too many links", path)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(existing), target)
			}
			return resolve(filepath.Join(filepath.Clean(target), rest), links+1)
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return path, nil
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
}

// expand replaces $WORKSPACE and a leading ~.
func (p *Policy) expand(s string) string {
	s = strings.ReplaceAll(s, "$WORKSPACE", p.workspace)
	s = strings.ReplaceAll(s, "${WORKSPACE}", p.workspace)
	if s == "~" {
		return p.home
	}
	if strings.HasPrefix(s, "~/") {
		return filepath.Join(p.home, s[2:])
	}
	return s
}

// CheckCommand checks a bash command: every command it runs, however it is
// chained or wrapped (;, &&, ||, |, $(…), `…`, bash -c, env, nohup …), must pass.
// CheckKey checks a memory tool's key: allow and deny patterns are globs over
// keys (path.Match), and under default_deny a key no allow pattern matches is
// refused (R6.2.5), as for every other tool.
func (p *Policy) CheckKey(tool, key string) error {
	return p.decide(tool, key, func(pat string) bool {
		ok, err := path.Match(pat, key)
		return err == nil && ok
	})
}

// CheckCommand checks a bash command line: every command of it must pass. A
// program named by a path (/bin/rm) is also refused by the deny patterns of
// its name (rm *); an allow pattern allows it as written only.
func (p *Policy) CheckCommand(command string) error {
	if strings.TrimSpace(command) == "" {
		return denied("bash: empty command")
	}
	for _, c := range Commands(command) {
		if err := p.decide("bash", c, func(pat string) bool { return MatchCommand(pat, c) }); err != nil {
			return err
		}
		name, args, _ := strings.Cut(c, " ")
		if base := path.Base(name); base != name {
			bare := strings.TrimSpace(base + " " + args)
			if err := p.refuse("bash", c, func(pat string) bool { return MatchCommand(pat, bare) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckDomain checks a host for a web tool (deny patterns, then allow_domains)
// and counts the request against the tool's rate limit.
func (p *Policy) CheckDomain(tool, host string) error {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !p.Enabled(tool) {
		return denied("tool %s is disabled", tool)
	}
	t := p.tools[tool]
	for _, d := range t.Deny {
		if MatchDomain(d, host) {
			return denied("%s: domain %s matches deny pattern %q", tool, host, d)
		}
	}
	if !slices.ContainsFunc(t.AllowDomains, func(d string) bool { return MatchDomain(d, host) }) {
		return denied("%s: domain %s is not in allow_domains", tool, host)
	}
	return p.rate(tool, t.RateLimit)
}

// NamesAddress reports whether tool's allow_domains lists ip itself (an IPv4
// address, written as one): the operator's leave for a web tool to connect
// to an internal address (loopback, private, link-local…), which a name,
// whatever it resolves to, never gives.
func (p *Policy) NamesAddress(tool string, ip netip.Addr) bool {
	if !p.Enabled(tool) {
		return false
	}
	for _, d := range p.tools[tool].AllowDomains {
		if a, err := netip.ParseAddr(d); err == nil && a.Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// CheckQuery checks a web_search call (no domain) against its tool's switch and
// rate limit.
func (p *Policy) CheckQuery(tool string) error {
	if !p.Enabled(tool) {
		return denied("tool %s is disabled", tool)
	}
	return p.rate(tool, p.tools[tool].RateLimit)
}

func (p *Policy) rate(tool string, perMinute int) error {
	if perMinute == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	window := now.Add(-time.Minute)
	kept := p.recent[tool][:0]
	for _, t := range p.recent[tool] {
		if t.After(window) {
			kept = append(kept, t)
		}
	}
	if len(kept) >= perMinute {
		p.recent[tool] = kept
		return denied("%s: rate limit of %d requests a minute reached", tool, perMinute)
	}
	p.recent[tool] = append(kept, now)
	return nil
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}
