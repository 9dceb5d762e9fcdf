package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestProblem(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		want string // in the problem; "" none
	}{
		{"default", Default(), ""},
		{"open", Open(), ""},
		{"none", Policy{Mode: ModeNone}, ""},
		{"hosts", Policy{Mode: ModeAllowlist, Allow: []string{"api.example.com", "*.example.com:443", "10.0.0.0/8", "127.0.0.1:8080", "[::1]:80", "2001:db8::/32", "preset:npm"}}, ""},
		{"no mode", Policy{}, "egress.mode must be one of open, allowlist, none"},
		{"open with entries", Policy{Mode: ModeOpen, Allow: []string{"a.example.com"}}, "egress.allow must be empty when mode is open"},
		{"bad port", Policy{Mode: ModeAllowlist, Allow: []string{"a.example.com:99999"}}, `egress.allow[0]: port "99999"`},
		{"leading zero port", Policy{Mode: ModeAllowlist, Allow: []string{"a.example.com:080"}}, "port"},
		{"scheme", Policy{Mode: ModeAllowlist, Allow: []string{"https://a.example.com"}}, "is a URL"},
		{"path", Policy{Mode: ModeAllowlist, Allow: []string{"a.example.com/x"}}, "is not a host"},
		{"tld wildcard", Policy{Mode: ModeAllowlist, Allow: []string{"*.com"}}, "is not a host"},
		{"inner wildcard", Policy{Mode: ModeAllowlist, Allow: []string{"a.*.com"}}, "is not a host"},
		{"preset", Policy{Mode: ModeAllowlist, Allow: []string{"preset:cargo"}}, `no preset "preset:cargo" (there are preset:apt, preset:github`},
		{"empty", Policy{Mode: ModeAllowlist, Allow: []string{""}}, "is not a host"},
		{"too many", Policy{Mode: ModeAllowlist, Allow: make([]string, MaxEntries+1)}, "at most 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.p.Problem("egress.")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Problem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMatcher(t *testing.T) {
	m, err := Compile(Policy{Mode: ModeAllowlist, Allow: []string{"api.example.com", "*.files.example.com:443", "10.1.0.0/16:22", "127.0.0.1:8080", "preset:github"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"api.example.com", 443, true},
		{"API.Example.com.", 80, true},
		{"example.com", 443, false},
		{"x.api.example.com", 443, false},
		{"a.files.example.com", 443, true},
		{"a.b.files.example.com", 443, true},
		{"files.example.com", 443, false},
		{"a.files.example.com", 80, false},
		{"github.com", 443, true},
		{"raw.githubusercontent.com", 443, true},
		{"github.com", 22, false},
		{"10.1.2.3", 22, true},
		{"10.1.2.3", 23, false},
		{"10.2.0.1", 22, false},
		{"127.0.0.1", 8080, true},
		{"127.0.0.2", 8080, false},
		{"127.0.0.1", 8081, false},
	} {
		var got bool
		if a, err := netip.ParseAddr(tc.host); err == nil {
			got = m.AllowsAddr(a, tc.port)
		} else {
			got = m.AllowsHost(tc.host, tc.port)
		}
		if got != tc.want {
			t.Errorf("%s:%d allowed = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	if m.AllowsHost("10.1.2.3", 22) {
		t.Error("an address rule matched a host name")
	}
	none, _ := Compile(Policy{Mode: ModeNone})
	open, _ := Compile(Open())
	if none.AllowsHost("api.example.com", 443) || !open.AllowsAddr(netip.MustParseAddr("192.0.2.1"), 1) {
		t.Error("none allows, or open refuses")
	}
}

func TestNarrows(t *testing.T) {
	allow := func(e ...string) Policy { return Policy{Mode: ModeAllowlist, Allow: e} }
	for _, tc := range []struct {
		name     string
		from, to Policy
		want     bool
	}{
		{"open to allowlist", Open(), allow("a.example.com"), true},
		{"allowlist to open", allow("a.example.com"), Open(), false},
		{"open to open", Open(), Open(), true},
		{"to none", allow("a.example.com"), Policy{Mode: ModeNone}, true},
		{"none to allowlist", Policy{Mode: ModeNone}, allow("a.example.com"), false},
		{"drop one", allow("a.example.com", "b.example.com"), allow("b.example.com"), true},
		{"add one", allow("a.example.com"), allow("a.example.com", "b.example.com"), false},
		{"pin a port", allow("a.example.com"), allow("a.example.com:443"), true},
		{"free a port", allow("a.example.com:443"), allow("a.example.com"), false},
		{"host under wildcard", allow("*.example.com"), allow("a.example.com"), true},
		{"deeper wildcard", allow("*.example.com"), allow("*.a.example.com"), true},
		{"wider wildcard", allow("*.a.example.com"), allow("*.example.com"), false},
		{"smaller cidr", allow("10.0.0.0/8"), allow("10.1.0.0/16", "10.2.3.4"), true},
		{"larger cidr", allow("10.1.0.0/16"), allow("10.0.0.0/8"), false},
		{"host is not an address", allow("10.0.0.0/8"), allow("a.example.com"), false},
		{"preset to part", allow("preset:github"), allow("github.com:443"), true},
		{"invalid", allow("a.example.com"), allow("https://x"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Narrows(tc.from, tc.to); got != tc.want {
				t.Errorf("Narrows = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzPolicy: any entry either has a problem or compiles, and a policy
// always narrows itself.
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{"api.example.com", "*.example.com:443", "10.0.0.0/8", "[::1]:80", "preset:npm", "a:b:c", "[x]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		p := Policy{Mode: ModeAllowlist, Allow: []string{entry}}
		_, err := Compile(p)
		if (p.Problem("") == "") != (err == nil) {
			t.Fatalf("Problem and Compile disagree on %q: %v", entry, err)
		}
		if err == nil && !Narrows(p, p) {
			t.Fatalf("%q does not narrow itself", entry)
		}
	})
}
