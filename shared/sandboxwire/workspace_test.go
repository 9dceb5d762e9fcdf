package sandboxwire

import (
	"strings"
	"testing"
)

func TestCheckCloneURL(t *testing.T) {
	t.Parallel()
	hosts := []string{"127.0.0.1", "git.internal"}
	for _, ok := range []string{
		"https://github.com/org/repo", "https://github.com/org/repo.git", "http://127.0.0.1:8080/app.git",
		"git://git.internal/app.git", "http://GIT.internal/app",
	} {
		if err := CheckCloneURL(ok, hosts); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "file:///etc", "/etc", "./repo", "ext::sh -c id", "fd::3", "ssh://git@github.com/org/repo", "git@github.com:org/repo",
		"http://example.com/repo", "git://example.com/repo", "https://bob:hunter2@github.com/org/repo", "https://bob@github.com/org/repo",
		"https://github.com/org/repo?x=1", "https://github.com/org/repo#x", "https://github.com/org/re po", "https://github.com/\norg",
		"https://-oProxyCommand=x/repo", "https:///repo", "https://github.com/" + strings.Repeat("x", 3000),
		// 169.254.169.254 and 127.0.0.1 as resolvers also read them
		"https://2852039166/repo", "https://0xA9FEA9FE/repo", "https://0251.0376.0251.0376/repo", "https://169.254.43518/repo",
		"https://0x7f.1/repo", "https://2130706433./repo", "http://017700000001/repo",
	} {
		err := CheckCloneURL(bad, hosts)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error repeats the credentials: %v", bad, err)
		}
	}
	if got := RedactURL("https://bob:hunter2@github.com/org/repo"); got != "https://github.com/org/repo" {
		t.Errorf("RedactURL = %q", got)
	}
}

func TestNumericForm(t *testing.T) {
	t.Parallel()
	for _, numeric := range []string{"2852039166", "0xA9FEA9FE", "0251.0376.0251.0376", "169.254.43518", "0x7f.1", "127.1", "0", "017700000001"} {
		if !numericForm(numeric) {
			t.Errorf("%q is not taken for a number", numeric)
		}
	}
	for _, name := range []string{"github.com", "1e100.net", "123.com", "127.0.0.1", "git.internal", "0xdeadbeef.example", "08.1", "1.2.3.4.5", "::1"} {
		if numericForm(name) {
			t.Errorf("%q is taken for a number", name)
		}
	}
}

func TestValidBranch(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"main", "feature/auth", "release-1.2", "a_b"} {
		if !ValidBranch(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "-x", "--upload-pack=id", "a/../b", "a..b", ".hidden", "a/.b", "a//b", "x.lock", "x.", "a b", "a~1", "a:b",
		strings.Repeat("b", 256)} {
		if ValidBranch(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
