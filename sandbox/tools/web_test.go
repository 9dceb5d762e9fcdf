package tools_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/sandbox/tools"
)

func webRegistry(t *testing.T, policyTOML string, o tools.Options) *tools.Registry {
	t.Helper()
	ws := t.TempDir()
	p, err := policy.Parse(policyTOML, ws)
	if err != nil {
		t.Fatal(err)
	}
	o.MemoryPath = filepath.Join(ws, "m.json")
	r, err := tools.New(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWebFetchDirect(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<html><head><style>p{}</style><script>evil()</script></head><body><h1>Title</h1><p>Fish &amp; chips</p></body></html>`))
		case "/away":
			http.Redirect(w, r, "http://elsewhere.invalid/x", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer site.Close()
	r := webRegistry(t, "[tools.web_fetch]\nallow_domains = [\"127.0.0.1\"]\nrate_limit = 3\n", tools.Options{})
	res := call(t, r, "web_fetch", `{"url":"`+site.URL+`/page"}`)
	ok(t, res, "Title", "Fish & chips")
	if strings.Contains(res.Content, "evil()") || strings.Contains(res.Content, "<p>") {
		t.Errorf("HTML not reduced to text: %q", res.Content)
	}
	fails(t, call(t, r, "web_fetch", `{"url":"`+site.URL+`/missing"}`), "404")
	fails(t, call(t, r, "web_fetch", `{"url":"`+site.URL+`/away"}`), "not in allow_domains")
	fails(t, call(t, r, "web_fetch", `{"url":"https://example.com/"}`), "not in allow_domains")
	fails(t, call(t, r, "web_fetch", `{"url":"file:///etc/passwd"}`), "not an http(s) URL")
	// Three fetches are allowed a minute; the rate limit refuses the next.
	fails(t, call(t, r, "web_fetch", `{"url":"`+site.URL+`/page"}`), "rate limit")
}

func TestWebThroughGateway(t *testing.T) {
	t.Parallel()
	var seen []string
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer gw-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		seen = append(seen, r.URL.Path)
		switch r.URL.Path {
		case "/fetch":
			target, _ := url.QueryUnescape(r.URL.Query().Get("url"))
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("gateway fetched " + target))
		case "/search":
			var q struct{ Query string }
			_ = json.NewDecoder(r.Body).Decode(&q)
			_ = json.NewEncoder(w).Encode(map[string]any{"results": []map[string]string{{"title": "Go", "url": "https://go.dev", "snippet": "about " + q.Query}}})
		}
	}))
	defer gw.Close()
	r := webRegistry(t, "[tools.web_fetch]\nallow_domains = [\"go.dev\"]\n", tools.Options{WebGateway: gw.URL, WebToken: "gw-token"})
	ok(t, call(t, r, "web_fetch", `{"url":"https://go.dev/doc"}`), "gateway fetched https://go.dev/doc")
	ok(t, call(t, r, "web_search", `{"query":"generics"}`), "1. Go", "https://go.dev", "about generics")
	if strings.Join(seen, ",") != "/fetch,/search" {
		t.Errorf("gateway saw %v", seen)
	}
	noGateway := webRegistry(t, "", tools.Options{})
	fails(t, call(t, noGateway, "web_search", `{"query":"x"}`), "needs the Internet Gateway")
}
