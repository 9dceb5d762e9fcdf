package tools_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/tools"
)

// countingSite is a web server on loopback that counts the requests it gets.
func countingSite(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if handler != nil {
			handler(w, r)
			return
		}
		_, _ = w.Write([]byte("internal data"))
	}))
	t.Cleanup(site.Close)
	return site, &hits
}

// TestSecuritySSRFFromWebFetch (issue 19): web_fetch, fetching directly (no
// gateway), never reaches an internal address on a model's behalf: not by a
// name of the allowlist that resolves to one (localhost), not through a
// redirect from an allowed site to one, not by any spelling of an internal
// address the allowlist does not name (link-local metadata, loopback in IPv4,
// IPv6 and IPv4-mapped forms, private ranges, decimal and short forms). Each
// refused case checks that the server behind it got no request. An address
// the operator names in allow_domains is reachable: the refusals are the
// guard's, not a broken fetch.
func TestSecuritySSRFFromWebFetch(t *testing.T) {
	t.Parallel()
	site, hits := countingSite(t, nil)
	port := site.URL[strings.LastIndex(site.URL, ":")+1:]

	t.Run("a name resolving to loopback", func(t *testing.T) {
		r := webRegistry(t, "[tools.web_fetch]\nallow_domains = [\"localhost\"]\n", tools.Options{})
		before := hits.Load()
		fails(t, call(t, r, "web_fetch", `{"url":"http://localhost:`+port+`/latest/meta-data/"}`), "internal address")
		if hits.Load() != before {
			t.Errorf("the server behind localhost got a request")
		}
		t.Logf("checked: localhost (allowed by name) resolves to 127.0.0.1: refused where it is dialled, no request made")
	})

	t.Run("a redirect to an internal address", func(t *testing.T) {
		// The allowed site is at 127.0.0.2, which the allowlist names; it
		// redirects to localhost, allowed by name, which is 127.0.0.1, which
		// the allowlist does not name.
		target, targetHits := countingSite(t, nil)
		tport := target.URL[strings.LastIndex(target.URL, ":")+1:]
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatalf("127.0.0.2 (loopback, as all of 127/8 on Linux): %v", err)
		}
		redirector := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/to-localhost":
				http.Redirect(w, r, "http://localhost:"+tport+"/secret", http.StatusFound)
			case "/to-metadata":
				http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
			}
		}), ReadHeaderTimeout: 10 * time.Second}}
		redirector.Start()
		t.Cleanup(redirector.Close)
		r := webRegistry(t, "[tools.web_fetch]\nallow_domains = [\"127.0.0.2\", \"localhost\"]\n", tools.Options{})
		fails(t, call(t, r, "web_fetch", `{"url":"`+redirector.URL+`/to-localhost"}`), "internal address")
		fails(t, call(t, r, "web_fetch", `{"url":"`+redirector.URL+`/to-metadata"}`), "denied by policy")
		if targetHits.Load() != 0 {
			t.Errorf("the redirect's internal target got %d requests", targetHits.Load())
		}
		t.Logf("checked: redirects from an allowed site to localhost (127.0.0.1, not named) and to 169.254.169.254 are refused; the target got no request")
	})

	t.Run("internal addresses the allowlist does not name", func(t *testing.T) {
		r := webRegistry(t, "[tools.web_fetch]\nallow_domains = [\"example.com\", \"*.example.com\"]\nrate_limit = 1000\n", tools.Options{})
		before := hits.Load()
		for _, u := range []string{
			"http://169.254.169.254/latest/meta-data/", "http://169.254.170.2/v2/credentials", "http://[fd00:ec2::254]/latest/meta-data/",
			"http://127.0.0.1:" + port + "/", "http://[::1]:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/",
			"http://[::ffff:a9fe:a9fe]/", "http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.1.1/", "http://[fc00::1]/",
			"http://2130706433:" + port + "/", "http://0x7f000001:" + port + "/", "http://127.1:" + port + "/", "http://0.0.0.0:" + port + "/",
			"http://localhost:" + port + "/", "http://LOCALHOST.:" + port + "/", "http://evil.example.com@127.0.0.1:" + port + "/",
		} {
			fails(t, call(t, r, "web_fetch", `{"url":"`+u+`"}`), "")
		}
		if hits.Load() != before {
			t.Errorf("an internal address got %d requests", hits.Load()-before)
		}
		t.Logf("checked: metadata (IPv4, ECS, IPv6), loopback (v4, v6, v4-mapped, decimal, hex, short), private ranges and userinfo tricks are refused; no request reached loopback")
	})

	t.Run("an address the operator names", func(t *testing.T) {
		r := webRegistry(t, "[tools.web_fetch]\nallow_domains = [\"127.0.0.1\"]\n", tools.Options{})
		before := hits.Load()
		ok(t, call(t, r, "web_fetch", `{"url":"`+site.URL+`/"}`), "internal data")
		if hits.Load() != before+1 {
			t.Errorf("the allowed fetch made %d requests", hits.Load()-before)
		}
		t.Logf("checked: allow_domains = [\"127.0.0.1\"] reaches 127.0.0.1: allowed by config")
	})
}
