// Package egress holds a sandbox's egress policy: which destinations the
// commands an agent runs may reach, as an agent type declares it (workspace
// config "egress") and a session carries it, changeable while it runs.
//
// A policy is a mode and a list: "open" reaches anywhere; "allowlist"
// reaches what its entries name; "none" reaches nothing. Whatever the
// policy, a sandbox reaches the platform (its gateway and model gateway):
// those are not entries. An entry is a host (api.example.com, or
// *.example.com for its subdomains), an IP or CIDR, each optionally with
// ":port", or a preset (preset:npm…) naming the hosts an installer needs.
//
// Package egressproxy enforces it; this package is the rules alone
// (standard library only).
package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The modes of a Policy.
const (
	ModeOpen      = "open"
	ModeAllowlist = "allowlist"
	ModeNone      = "none"
)

// Modes lists the modes, for messages and schemas.
var Modes = []string{ModeOpen, ModeAllowlist, ModeNone}

// Policy is what a sandbox may reach.
type Policy struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow"`
}

// Default is the policy of an agent type that declares none when it is
// created: an allowlist of nothing but the platform.
func Default() Policy { return Policy{Mode: ModeAllowlist, Allow: []string{}} }

// Open is the policy of a session without one (no agent type, or a type
// stored before policies): anywhere, as before them.
func Open() Policy { return Policy{Mode: ModeOpen, Allow: []string{}} }

// None is the policy of a sandbox that reaches nothing but the platform
// (an orchestrator job's without network).
func None() Policy { return Policy{Mode: ModeNone, Allow: []string{}} }

// Isolated reports whether p's sandbox runs cut off from the network, its
// traffic going through the egress proxy: every mode but open.
func (p Policy) Isolated() bool { return p.Mode != ModeOpen }

// Offline reports whether p's sandbox reaches nothing but the platform.
func (p Policy) Offline() bool { return p.Mode == ModeNone }

// Bounds of a policy.
const (
	MaxEntries     = 256
	maxEntryLength = 260
)

// Presets are the destinations an installer reaches, by preset name
// ("preset:<name>" in an allow list).
var Presets = map[string][]string{
	"npm":    {"registry.npmjs.org:443", "*.npmjs.org:443", "registry.yarnpkg.com:443"},
	"go":     {"proxy.golang.org:443", "sum.golang.org:443", "index.golang.org:443", "storage.googleapis.com:443"},
	"apt":    {"deb.debian.org:80", "deb.debian.org:443", "security.debian.org:80", "security.debian.org:443", "archive.ubuntu.com:80", "security.ubuntu.com:80", "ports.ubuntu.com:80"},
	"pypi":   {"pypi.org:443", "files.pythonhosted.org:443"},
	"github": {"github.com:443", "*.github.com:443", "*.githubusercontent.com:443"},
}

// PresetPrefix starts an allow list's preset entries.
const PresetPrefix = "preset:"

// Problem says what is wrong with p, its fields named under prefix
// ("egress."); "" when nothing.
func (p Policy) Problem(prefix string) string {
	if !slices.Contains(Modes, p.Mode) {
		return fmt.Sprintf("%smode must be one of %s.", prefix, strings.Join(Modes, ", "))
	}
	if p.Mode != ModeAllowlist && len(p.Allow) > 0 {
		return fmt.Sprintf("%sallow must be empty when mode is %s.", prefix, p.Mode)
	}
	if len(p.Allow) > MaxEntries {
		return fmt.Sprintf("%sallow holds at most %d entries.", prefix, MaxEntries)
	}
	for i, e := range p.Allow {
		if _, err := parse(e); err != nil {
			return fmt.Sprintf("%sallow[%d]: %v.", prefix, i, err)
		}
	}
	return ""
}

// Rule is one destination an allow list names.
type Rule struct {
	// Host is a lower-case host name, "*.example.com" for its subdomains; ""
	// for an address rule.
	Host string
	// Prefix is the addresses of an address rule (an IP is a /32 or /128).
	Prefix netip.Prefix
	// Port is the one port it allows; 0 any.
	Port int
}

// Matcher answers whether a policy allows a destination.
type Matcher struct {
	open  bool
	rules []Rule
}

// Compile returns p's Matcher; an error if p has a Problem.
func Compile(p Policy) (Matcher, error) {
	if s := p.Problem(""); s != "" {
		return Matcher{}, fmt.Errorf("egress policy: %s", s)
	}
	m := Matcher{open: p.Mode == ModeOpen}
	for _, e := range p.Allow {
		rs, _ := parse(e)
		m.rules = append(m.rules, rs...)
	}
	return m, nil
}

// AllowsHost reports whether a rule names host (a name, not an address) at
// port.
func (m Matcher) AllowsHost(host string, port int) bool {
	if m.open {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return slices.ContainsFunc(m.rules, func(r Rule) bool { return r.Host != "" && portOK(r.Port, port) && hostMatch(r.Host, host) })
}

// AllowsAddr reports whether a rule names addr at port (an address rule:
// an IP or CIDR).
func (m Matcher) AllowsAddr(addr netip.Addr, port int) bool {
	if m.open {
		return true
	}
	addr = addr.Unmap()
	return slices.ContainsFunc(m.rules, func(r Rule) bool { return r.Host == "" && portOK(r.Port, port) && r.Prefix.Contains(addr) })
}

// HasAddrRules reports whether m has address rules (IPs, CIDRs): whether
// a host name's addresses can be allowed when the name is not.
func (m Matcher) HasAddrRules() bool {
	return m.open || slices.ContainsFunc(m.rules, func(r Rule) bool { return r.Host == "" })
}

// Open reports whether m allows anywhere.
func (m Matcher) Open() bool { return m.open }

// Narrows reports whether every destination to allows, from allows too:
// whether changing a policy from from to to only takes destinations away.
func Narrows(from, to Policy) bool {
	if to.Mode == ModeOpen {
		return from.Mode == ModeOpen
	}
	f, err := Compile(from)
	if err != nil {
		return false
	}
	t, err := Compile(to)
	if err != nil {
		return false
	}
	if f.open {
		return true
	}
	return !slices.ContainsFunc(t.rules, func(r Rule) bool {
		return !slices.ContainsFunc(f.rules, func(c Rule) bool { return covers(c, r) })
	})
}

// covers reports whether every destination of r is one of c's.
func covers(c, r Rule) bool {
	if c.Port != 0 && c.Port != r.Port {
		return false
	}
	if r.Host != "" {
		if c.Host == "" {
			return false
		}
		if strings.HasPrefix(r.Host, "*.") {
			// A wildcard is covered by a wildcard of the same or a wider suffix.
			return strings.HasPrefix(c.Host, "*.") && (c.Host == r.Host || strings.HasSuffix(r.Host, c.Host[1:]))
		}
		return hostMatch(c.Host, r.Host)
	}
	return c.Host == "" && c.Prefix.Bits() <= r.Prefix.Bits() && c.Prefix.Contains(r.Prefix.Addr())
}

func portOK(rule, port int) bool { return rule == 0 || rule == port }

// hostMatch reports whether pattern (a host, or *.suffix) names host.
func hostMatch(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return pattern == host
}

// parse reads one allow list entry into its rules.
func parse(entry string) ([]Rule, error) {
	if len(entry) > maxEntryLength {
		return nil, fmt.Errorf("longer than %d characters", maxEntryLength)
	}
	if name, ok := strings.CutPrefix(entry, PresetPrefix); ok {
		hosts, ok := Presets[name]
		if !ok {
			names := make([]string, 0, len(Presets))
			for n := range Presets {
				names = append(names, PresetPrefix+n)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("no preset %q (there are %s)", entry, strings.Join(names, ", "))
		}
		var rules []Rule
		for _, h := range hosts {
			r, err := parseOne(h)
			if err != nil {
				return nil, err
			}
			rules = append(rules, r)
		}
		return rules, nil
	}
	r, err := parseOne(entry)
	if err != nil {
		return nil, err
	}
	return []Rule{r}, nil
}

// parseOne reads a host, IP or CIDR with an optional :port.
func parseOne(entry string) (Rule, error) {
	if strings.Contains(entry, "://") {
		return Rule{}, fmt.Errorf("%q is a URL: give its host, with an optional :port", entry)
	}
	dest, port, err := splitPort(entry)
	if err != nil {
		return Rule{}, err
	}
	if p, err := netip.ParsePrefix(dest); err == nil {
		return Rule{Prefix: p.Masked(), Port: port}, nil
	}
	if a, err := netip.ParseAddr(dest); err == nil {
		if a.Zone() != "" {
			return Rule{}, fmt.Errorf("%q: an address with a zone", entry)
		}
		return Rule{Prefix: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), Port: port}, nil
	}
	host := strings.ToLower(strings.TrimSuffix(dest, "."))
	if !validHost(host) {
		return Rule{}, fmt.Errorf("%q is not a host (api.example.com, *.example.com), an IP or a CIDR, with an optional :port, or a preset", entry)
	}
	return Rule{Host: host, Port: port}, nil
}

// splitPort splits entry's optional :port off ([v6]:port for an IPv6
// address or prefix).
func splitPort(entry string) (string, int, error) {
	if rest, ok := strings.CutPrefix(entry, "["); ok {
		dest, after, ok := strings.Cut(rest, "]")
		if !ok {
			return "", 0, fmt.Errorf("%q: no closing ]", entry)
		}
		if after == "" {
			return dest, 0, nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", 0, fmt.Errorf("%q: ] not followed by :port", entry)
		}
		port, err := parsePort(p)
		return dest, port, err
	}
	if strings.Count(entry, ":") > 1 {
		return entry, 0, nil // an IPv6 address or prefix without a port
	}
	dest, p, ok := strings.Cut(entry, ":")
	if !ok {
		return entry, 0, nil
	}
	port, err := parsePort(p)
	return dest, port, err
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s != strconv.Itoa(n) {
		return 0, fmt.Errorf("port %q is not from 1 to 65535", s)
	}
	return n, nil
}

// ValidHost reports whether h is a host name (lower case, no wildcard, no
// port): what a secret's rule names, say.
func ValidHost(h string) bool { return !strings.HasPrefix(h, "*.") && validHost(h) }

// validHost reports whether h is a DNS name, or *. and one with a dot.
func validHost(h string) bool {
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		return strings.Contains(rest, ".") && validHost(rest)
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}
