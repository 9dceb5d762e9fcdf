package envdtoken_test

import (
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/envdtoken"
)

func TestTokens(t *testing.T) {
	k, err := envdtoken.New([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	other := envdtoken.Random()
	tok := k.Token("sb-1")
	if !strings.HasPrefix(tok, envdtoken.Prefix) || tok != k.Token("sb-1") {
		t.Fatalf("token %q is not stable or lacks its prefix", tok)
	}
	for _, c := range []struct {
		name, id, tok string
		want          bool
	}{
		{"its own", "sb-1", tok, true},
		{"another sandbox's", "sb-2", tok, false},
		{"another key's", "sb-1", other.Token("sb-1"), false},
		{"without the prefix", "sb-1", strings.TrimPrefix(tok, envdtoken.Prefix), false},
		{"cut short", "sb-1", tok[:len(tok)-2], false},
		{"not base64", "sb-1", envdtoken.Prefix + "!!", false},
		{"empty", "sb-1", "", false},
	} {
		if got := k.Check(c.id, c.tok); got != c.want {
			t.Errorf("%s: Check = %v, want %v", c.name, got, c.want)
		}
	}
	if _, err := envdtoken.New([]byte("short")); err == nil {
		t.Error("a short key was taken")
	}
	var zero envdtoken.Key
	if zero.Check("sb-1", zero.Token("sb-1")) {
		t.Error("the zero key checks a token")
	}
}

// A traffic token opens previews only: it is no access token, an access
// token is no traffic token, and each is its sandbox's alone.
func TestTrafficTokens(t *testing.T) {
	k := envdtoken.Random()
	traffic, access := k.TrafficToken("sb-1"), k.Token("sb-1")
	if !strings.HasPrefix(traffic, envdtoken.TrafficPrefix) || traffic != k.TrafficToken("sb-1") {
		t.Fatalf("traffic token %q is not stable or lacks its prefix", traffic)
	}
	if !k.CheckTraffic("sb-1", traffic) {
		t.Error("its own traffic token is refused")
	}
	if k.CheckTraffic("sb-2", traffic) || envdtoken.Random().CheckTraffic("sb-1", traffic) {
		t.Error("a traffic token opens another sandbox, or under another key")
	}
	if k.Check("sb-1", traffic) || k.Check("sb-1", envdtoken.Prefix+strings.TrimPrefix(traffic, envdtoken.TrafficPrefix)) {
		t.Error("a traffic token is taken as an access token")
	}
	if k.CheckTraffic("sb-1", access) || k.CheckTraffic("sb-1", envdtoken.TrafficPrefix+strings.TrimPrefix(access, envdtoken.Prefix)) {
		t.Error("an access token is taken as a traffic token")
	}
}
