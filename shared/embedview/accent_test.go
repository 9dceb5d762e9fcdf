package embedview_test

import (
	"regexp"
	"testing"

	"github.com/remote-agents/remote-agents/shared/embedview"
)

func TestAccent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string // want "": not a colour
	}{
		{"#aa3355", ":root{--accent:#aa3355;--on-accent:#fff}"},
		{"#AA3355", ":root{--accent:#aa3355;--on-accent:#fff}"},
		{"#a35", ":root{--accent:#aa3355;--on-accent:#fff}"},
		{"#ffee00", ":root{--accent:#ffee00;--on-accent:#000}"},
		{"#000000", ":root{--accent:#000000;--on-accent:#fff}"},
		{"#fff", ":root{--accent:#ffffff;--on-accent:#000}"},
		{"", ""},
		{"aa3355", ""},
		{"#aa335", ""},
		{"#aa33557", ""},
		{"#aa3355ff", ""},
		{"#gg3355", ""},
		{"red", ""},
		{"#aa3355;}body{display:none", ""},
		{"#aa3355\n", ""},
		{"#aa3355</style><script>alert(1)</script>", ""},
		{"rgb(1,2,3)", ""},
		{"var(--x)", ""},
		{"#ａａ3355", ""},
	}
	for _, c := range cases {
		rule, ok := embedview.Accent(c.in)
		if ok != (c.want != "") || rule != c.want {
			t.Errorf("Accent(%q) = %q, %v; want %q", c.in, rule, ok, c.want)
		}
	}
}

var accentRule = regexp.MustCompile(`^:root\{--accent:#[0-9a-f]{6};--on-accent:#(fff|000)\}$`)

// Whatever the parameter, the rule is a colour and nothing else.
func FuzzAccent(f *testing.F) {
	for _, s := range []string{"#aa3355", "#abc", "#aa3355;}", "red"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if rule, ok := embedview.Accent(in); ok && !accentRule.MatchString(rule) || !ok && rule != "" {
			t.Errorf("Accent(%q) = %q, %v", in, rule, ok)
		}
	})
}
