package toolenv_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/toolenv"
)

// What an agent's environment holds in a sandbox, on ECS and locally.
var agentEnviron = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/agent", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm",
	"SANDBOX_MCP_AUTH_TOKEN=rsb_secret", "RA_BOOTSTRAP_CODE=rbc_secret", "PROLIFERATE_SESSION_ID=6071cda9",
	"PROLIFERATE_GATEWAY_URL=https://gw.example", "RA_GENERATION=1", "RA_LLM_PROVIDER=anthropic", "RA_TOOL_USER=agent",
	"ANTHROPIC_API_KEY=sk-ant-secret", "OPENAI_API_KEY=sk-secret", "MY_KEY=k",
	"AWS_ACCESS_KEY_ID=AKIA", "AWS_SECRET_ACCESS_KEY=s", "AWS_SESSION_TOKEN=t",
	"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/x", "ECS_CONTAINER_METADATA_URI_V4=http://169.254.170.2/v4/x",
	"TMUX=/tmp/tmux-0/ra,1,0", "RA_TMUX_LOG_PIPE=/tmp/x/log", "GOFLAGS=-mod=mod", "LC_=odd", "NOEQUALS",
}

func TestEnvironIsAnAllowlist(t *testing.T) {
	t.Parallel()
	e := toolenv.New(agentEnviron, "/workspace", nil)
	want := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/agent", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm", "WORKSPACE=/workspace"}
	if got := e.Environ(); !slices.Equal(got, want) {
		t.Errorf("Environ() = %q\nwant %q", got, want)
	}
	// The user's values join, under their names, unless a name is the
	// platform's or the host's.
	e.SetValues(map[string]string{
		"STRIPE_KEY": "sk_test_1", "DATABASE_URL": "postgres://x", "PATH": "/evil", "HOME": "/evil", "WORKSPACE": "/evil",
		"SANDBOX_MCP_AUTH_TOKEN": "forged", "RA_LLM_PROVIDER": "x", "PROLIFERATE_GATEWAY_URL": "x", "AWS_REGION": "x",
		"ECS_X": "x", "bad name": "x", "LC_ALL": "x",
	})
	want = append(want, "DATABASE_URL=postgres://x", "STRIPE_KEY=sk_test_1")
	if got := e.Environ(); !slices.Equal(got, want) {
		t.Errorf("with the user's values: %q\nwant %q", got, want)
	}
	e.SetValues(nil)
	if got := e.Environ(); len(got) != 6 {
		t.Errorf("after the values were cleared: %q", got)
	}
}

func TestEnvironOfAnotherUser(t *testing.T) {
	t.Parallel()
	u := &toolenv.User{Name: "tools", UID: 10002, GID: 10002, Home: "/home/tools"}
	got := toolenv.New(agentEnviron, "/workspace", u).Environ()
	for _, want := range []string{"HOME=/home/tools", "USER=tools", "LOGNAME=tools", "PATH=/usr/local/bin:/usr/bin:/bin"} {
		if !slices.Contains(got, want) {
			t.Errorf("Environ() = %q, lacks %s", got, want)
		}
	}
	if slices.Contains(got, "HOME=/home/agent") {
		t.Errorf("the agent's HOME is the tools' user's: %q", got)
	}
	if c := u.Credential(); c.Uid != 10002 || c.Gid != 10002 {
		t.Errorf("credential %+v", c)
	}
	var none *toolenv.User
	if none.Credential() != nil || none.Own("/nonexistent") != nil || none.OwnTree("/nonexistent") != nil {
		t.Error("the nil user is not the agent's own")
	}
}

func TestReserved(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"STRIPE_KEY", false}, {"DATABASE_URL", false}, {"_X", false}, {"ANTHROPIC_API_KEY", false}, // the user's own key
		{"PATH", true}, {"HOME", true}, {"LC_CTYPE", true}, {"WORKSPACE", true}, {"SANDBOX_MCP_AUTH_TOKEN", true},
		{"RA_BOOTSTRAP_CODE", true}, {"PROLIFERATE_SESSION_ID", true}, {"AWS_SECRET_ACCESS_KEY", true}, {"ECS_AGENT_URI", true},
		{"", true}, {"1X", true}, {"A-B", true}, {"A=B", true},
	} {
		if got := toolenv.Reserved(tt.name); got != tt.want {
			t.Errorf("Reserved(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Only root may run commands as another user: elsewhere a tool user is an
// error, never commands quietly run as the agent.
func TestLookupUser(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if os.Geteuid() != 0 {
		if _, err := toolenv.LookupUser("nobody", ws); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("LookupUser as %d: %v, want the root error", os.Geteuid(), err)
		}
		return
	}
	for _, bad := range []string{"root", "0", "no-such-user-here"} {
		if _, err := toolenv.LookupUser(bad, ws); err == nil {
			t.Errorf("LookupUser(%q) succeeded", bad)
		}
	}
	u, err := toolenv.LookupUser("nobody", ws)
	if err != nil {
		t.Fatal(err)
	}
	if u.UID == 0 || u.Name != "nobody" {
		t.Errorf("user %+v", u)
	}
	if info, err := os.Stat(u.Home); err != nil || !info.IsDir() {
		t.Errorf("home %q: %v", u.Home, err)
	}
	byID, err := toolenv.LookupUser(strconvUID(u.UID), ws)
	if err != nil || byID.Name != u.Name {
		t.Errorf("by id: %+v %v", byID, err)
	}
	// An id the system does not list (a base image without the agent
	// user): that id and group, at home in the workspace.
	unlisted, err := toolenv.LookupUser("48213", ws)
	if err != nil || unlisted.UID != 48213 || unlisted.GID != 48213 || unlisted.Home != ws {
		t.Errorf("an unlisted id: %+v %v", unlisted, err)
	}
	// The workspace, and what is created in it for the tools, become theirs.
	if err := os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a", "b", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := u.OwnTree(ws); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "a", "b", "f")} {
		if uid := owner(t, p); uid != u.UID {
			t.Errorf("%s belongs to %d", p, uid)
		}
	}
}
