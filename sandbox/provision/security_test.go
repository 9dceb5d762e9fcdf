package provision_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/provision"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// secTarget is an HTTP server on loopback standing for an internal service:
// it counts the requests it gets.
func secTarget(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestSecuritySSRFFromTheWorkspaceClone (issue 19): the sandbox's git clone
// of a workspace's repository, with real git, never reaches an internal
// address the operator does not list (git_insecure_hosts): not an address
// written in the URL (metadata, loopback, private, IPv6 forms), not a name
// that resolves to one (this machine's host name), not a redirect from a
// listed host to an unlisted one. Each refusal leaves the workspace empty and
// says why; the internal server got no request. A listed host is cloned
// from: the refusals are the guard's.
func TestSecuritySSRFFromTheWorkspaceClone(t *testing.T) {
	t.Parallel()
	target, hits := secTarget(t, nil)
	port := target.URL[strings.LastIndex(target.URL, ":")+1:]
	refused := func(t *testing.T, url string, hosts []string, why string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "ws")
		rec := &recorder{}
		st := provision.Run(t.Context(), &sandboxwire.WorkspaceSpec{RepositoryURL: url, InsecureHosts: hosts, SetupTimeoutSeconds: 60},
			provision.Options{Dir: dir, Emit: rec.emit, Log: slog.New(slog.DiscardHandler)})
		if st.Status != sandboxwire.WorkspaceDegraded || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], why) {
			t.Errorf("%s: %+v, want degraded: %s", url, st, why)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: the workspace holds %d entries", url, len(entries))
		}
		if strings.Contains(rec.raw(), "internal data") {
			t.Errorf("%s: the internal answer is in the events", url)
		}
	}

	t.Run("internal addresses in the URL", func(t *testing.T) {
		for _, u := range []string{
			"https://169.254.169.254/latest/meta-data.git", "https://169.254.170.2/v2/credentials.git", "https://[fd00:ec2::254]/x.git",
			"https://127.0.0.1:" + port + "/repo.git", "https://[::1]:" + port + "/repo.git", "https://[::ffff:127.0.0.1]:" + port + "/repo.git",
			"https://10.0.0.1/repo.git", "https://172.16.0.1/repo.git", "https://192.168.1.1/repo.git", "https://[fc00::1]/repo.git",
			"https://localhost:" + port + "/repo.git",
		} {
			refused(t, u, []string{"git.example.com"}, "internal address")
		}
		if hits.Load() != 0 {
			t.Errorf("the internal server got %d requests", hits.Load())
		}
		t.Logf("checked: metadata, loopback (v4, v6, v4-mapped, localhost), private and unique-local hosts are refused before git runs")
	})

	t.Run("a name that resolves to an internal address", func(t *testing.T) {
		// A public-looking name whose DNS answers loopback (the rebinding
		// attack): the sandbox resolves it, refuses it, and git never runs.
		const host = "repo.attacker.example"
		provision.Resolve(t, host, netip.MustParseAddr("127.0.0.1"))
		before := hits.Load()
		refused(t, "https://"+host+":"+port+"/repo.git", nil, "resolves to an internal address")
		if hits.Load() != before {
			t.Errorf("the internal server got a request")
		}
		t.Logf("checked: %s (resolving to 127.0.0.1) is refused where the sandbox resolves it; no request made", host)
	})

	t.Run("a redirect from a listed host", func(t *testing.T) {
		// The listed host (127.0.0.1, over http) redirects git to
		// localhost, which is not listed.
		redirector, _ := secTarget(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://localhost:"+port+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
		})
		before := hits.Load()
		refused(t, redirector.URL+"/repo.git", []string{"127.0.0.1"}, "could not be cloned")
		if hits.Load() != before {
			t.Errorf("git followed the redirect to an unlisted host: it got %d requests", hits.Load()-before)
		}
		t.Logf("checked: git does not follow a redirect from a listed host to an unlisted one")
	})

	t.Run("a listed host", func(t *testing.T) {
		repo := serve(t)
		dir := filepath.Join(t.TempDir(), "ws")
		st, _ := run(t, dir, &sandboxwire.WorkspaceSpec{RepositoryURL: repo.URL, InsecureHosts: []string{"127.0.0.1"}, SetupTimeoutSeconds: 60})
		if st.Status != sandboxwire.WorkspaceReady || read(t, filepath.Join(dir, "README.md")) != "main\n" {
			t.Errorf("the listed host's repository was not cloned: %+v", st)
		}
		t.Logf("checked: a repository on 127.0.0.1, listed in git_insecure_hosts, is cloned")
	})
}
