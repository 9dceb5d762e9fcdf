package systemtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/localstack/browsertest"

	"github.com/remote-agents/remote-agents/shared/config"
)

// browser starts a headless Chromium for the test and returns a tab.
func browser(t testing.TB) context.Context {
	t.Helper()
	return browsertest.Start(t, 900, 700)
}

// inBrowser runs steps in the tab, within a time limit.
func inBrowser(t testing.TB, ctx context.Context, within time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for i, step := range steps {
		if err := chromedp.Do(ctx, step); err != nil {
			t.Fatalf("browser step %d of %d: %v", i+1, len(steps), err)
		}
	}
}

// value runs one action in the tab and returns its value.
func value[T any](t testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// script writes a scripted model's steps for the agent.
func script(t testing.TB, steps ...map[string]any) string {
	t.Helper()
	var b bytes.Buffer
	for _, st := range steps {
		line, _ := json.Marshal(st)
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// parentPage serves a page on its own origin that frames src and records the
// embed's ready message in its title.
func parentPage(t testing.TB) (origin string, frame func(src string) string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>waiting</title><iframe id="f" width="800" height="600" src="%s"></iframe>
<script>addEventListener("message", (e) => { if (e.data && e.data.type === "remote-agent:ready") document.title = "ready"; });</script>`,
			strings.ReplaceAll(r.URL.Query().Get("src"), `"`, "%22"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	origin = "http://" + ln.Addr().String()
	return origin, func(src string) string { return origin + "/?src=" + strings.ReplaceAll(src, "&", "%26") }
}

// The embed view in a real browser: the agent's reply arrives over SSE, a
// message goes out from the composer, a question's option is clicked and
// answered, and the token leaves the address bar.
func TestEmbedViewInABrowser(t *testing.T) {
	t.Parallel()
	path := script(t,
		map[string]any{"text": "Hello! How can I help?"},
		map[string]any{"text": "Let me ask.", "tool_calls": []any{map[string]any{"name": "ask_user", "args": map[string]any{"question": "Which colour?", "options": []string{"Red", "Blue"}}}}},
		map[string]any{"text": "Pick a colour above."},
		map[string]any{"text": "Blue it is."},
	)
	allowed, frameAllowed := parentPage(t)
	_, frameOther := parentPage(t)
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+path, "RA_NO_TMUX=1"), withConfig(func(c *config.RemoteAgents) {
		c.AllowedOrigins = []string{allowed}
	}))
	created := s.create(createBody("Hi"))
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	embedURL := created.str("embed_url")
	tab := browser(t)

	inBrowser(t, tab, 30*time.Second,
		chromedp.Navigate(embedURL),
		chromedp.WaitVisible(chromedp.CSS(`[data-role="thread"] li.agent`)),
	)
	if location := value(t, tab, chromedp.Evaluate[string](`location.href`)); strings.Contains(location, "token=") || !strings.Contains(location, "/embed/") {
		t.Errorf("the token is still in the address bar: %s", location)
	}
	if first := value(t, tab, chromedp.Text(chromedp.CSS(`[data-role="thread"] li.agent`))); first != "Hello! How can I help?" {
		t.Errorf("first reply %q", first)
	}

	// Send a message; the agent asks a question with options.
	inBrowser(t, tab, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS(`[data-role="composer"]`), "What next?"),
		chromedp.Click(chromedp.CSS(`[data-role="send"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role="thread"] li.user`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-role="option"][data-option-id="o2"]`)),
	)
	if question := value(t, tab, chromedp.Text(chromedp.CSS(`[data-role="question"]`))); !strings.Contains(question, "Which colour?") || !strings.Contains(question, "Blue") {
		t.Errorf("question %q", question)
	}
	// Click an option; the answer reaches the agent, which replies.
	inBrowser(t, tab, 30*time.Second,
		chromedp.Click(chromedp.CSS(`[data-role="option"][data-option-id="o2"]`)),
		voidPoll(`[...document.querySelectorAll('[data-role="thread"] li.agent')].some(li => li.textContent === "Blue it is.")`, 25*time.Second),
	)
	replies := value(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-role="thread"] li')].map(li => li.className + ": " + li.textContent)`))
	saveArtifact(t, "embed-view.png", value(t, tab, chromedp.FullScreenshot(100)))
	joined := strings.Join(replies, "\n")
	for _, want := range []string{"user: What next?", "user: Answered: Blue", "agent: Blue it is."} {
		if !strings.Contains(joined, want) {
			t.Errorf("thread lacks %q:\n%s", want, joined)
		}
	}
	// Reloaded without the token in its URL (the page took it out), the page
	// comes back: the first load exchanged the token for a cookie.
	inBrowser(t, tab, 30*time.Second,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-role="composer"]`)),
		voidPoll(`[...document.querySelectorAll('[data-role="thread"] li.agent')].some(li => li.textContent === "Blue it is.")`, 25*time.Second),
	)
	if location := value(t, tab, chromedp.Evaluate[string](`location.href`)); strings.Contains(location, "token=") {
		t.Errorf("the reloaded page's address holds the token: %s", location)
	}

	// No chrome: nothing links out of the page.
	if links := value(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("a, nav, header").length`)); links != 0 {
		t.Errorf("%d links or navigation elements in the embed view", links)
	}

	// An allowed origin may frame the page; another may not (frame-ancestors).
	inBrowser(t, tab, 20*time.Second,
		chromedp.Navigate(frameAllowed(embedURL)),
		voidPoll(`document.title === "ready"`, 15*time.Second),
	)
	inBrowser(t, tab, 20*time.Second, chromedp.Navigate(frameOther(embedURL)), chromedp.Sleep(3*time.Second))
	if title := value(t, tab, chromedp.Title()); title != "waiting" {
		t.Errorf("a disallowed origin framed the embed view (title %q)", title)
	}

	// A wrong token gets a plain error page, nothing of the agent.
	bad := strings.Replace(embedURL, "token=", "token=x", 1)
	inBrowser(t, tab, 10*time.Second, chromedp.Navigate(bad))
	if body := value(t, tab, chromedp.Text(chromedp.CSS("body"))); !strings.Contains(body, "not valid") || strings.Contains(body, "Hello") {
		t.Errorf("bad token page: %q", body)
	}
}

// voidPoll waits until a JavaScript expression is true.
func voidPoll(expr string, within time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(within))
}

// saveArtifact keeps a test artifact: in $RA_ARTIFACTS when set, else in the
// test's temporary directory (logged).
func saveArtifact(t testing.TB, name string, data []byte) {
	t.Helper()
	dir := os.Getenv("RA_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact: %s (%d bytes)", p, len(data))
}

// Each optional part is absent from the DOM unless turned on, by create or by URL.
func TestEmbedFeatureFlags(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	plain := s.create(createBody("Hi"))
	withUpload := createBody("Hi")
	withUpload["feature_flags"] = map[string]any{"file_upload": true}
	upload := s.create(withUpload)
	if plain.status != http.StatusOK || upload.status != http.StatusOK {
		t.Fatalf("create: %s %s", plain.raw, upload.raw)
	}
	checkEmbedHeaders(t, s, plain.str("embed_url"))
	tab := browser(t)
	features := func(u string) string {
		inBrowser(t, tab, 20*time.Second, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS(`[data-role="composer"]`)))
		got := value(t, tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-feature]")].map(e => e.dataset.feature).sort()`))
		return strings.Join(got, ",")
	}
	cases := []struct{ url, want string }{
		{plain.str("embed_url"), ""},
		{plain.str("embed_url") + "&file_upload=0&voice_mic=no", ""},
		{plain.str("embed_url") + "&context_usage=1", "context_usage"},
		{plain.str("embed_url") + "&voice_mic=true&file_upload=TRUE", "file_upload,voice_mic"},
		{upload.str("embed_url"), "file_upload"},
		{upload.str("embed_url") + "&context_usage=true", "context_usage,file_upload"},
	}
	for _, c := range cases {
		if got := features(c.url); got != c.want {
			t.Errorf("%s: features %q, want %q", c.url[strings.Index(c.url, "/embed/"):], got, c.want)
		}
	}
	inBrowser(t, tab, 20*time.Second, chromedp.Navigate(plain.str("embed_url")+"&context_usage=1&voice_mic=1&file_upload=1"),
		chromedp.WaitVisible(chromedp.CSS(`[data-feature="voice_mic"]`)))
	saveArtifact(t, "embed-all-features.png", value(t, tab, chromedp.FullScreenshot(100)))

	// File upload: the file goes to the bucket through a presigned URL and
	// reaches the agent as an attachment, saved in its workspace.
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("remember the milk"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The bounds hold on a loaded machine (make test's parallel end-to-end
	// tests on 2 cores, where this sequence has taken over a minute; alone
	// it takes seconds): the steps wait on events.
	inBrowser(t, tab, 120*time.Second,
		chromedp.Navigate(upload.str("embed_url")),
		chromedp.WaitReady(chromedp.CSS(`[data-role="file-input"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`[data-role="file-input"]`), []string{file}),
		voidPoll(`document.querySelectorAll('[data-role="attachments"] li').length === 1`, 60*time.Second),
		chromedp.SendKeys(chromedp.CSS(`[data-role="composer"]`), "see the file"),
		chromedp.Click(chromedp.CSS(`[data-role="send"]`)),
		voidPoll(`[...document.querySelectorAll('[data-role="thread"] li.user')].some(li => li.textContent.includes("Attached: notes.txt"))`, 60*time.Second),
	)
	id := upload.str("agent_id")
	eventually(t, 15*time.Second, "attachment saved in the workspace", func() bool {
		matches, _ := filepath.Glob(filepath.Join(s.work, "sandboxes", id+"-1", "attachments", "*-notes.txt"))
		if len(matches) != 1 {
			return false
		}
		b, err := os.ReadFile(matches[0])
		return err == nil && string(b) == "remember the milk"
	})
}

// checkEmbedHeaders checks the embed page's security headers, and that its one
// inline script is the one the policy allows by hash.
func checkEmbedHeaders(t *testing.T, s *stack, embedURL string) {
	t.Helper()
	r := s.call(http.MethodGet, strings.TrimPrefix(embedURL, s.srv.URL), "", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.headers.Get("Content-Type"), "text/html") {
		t.Fatalf("embed page: %d %v", r.status, r.headers)
	}
	csp := r.headers.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'self'", "base-uri 'none'", "script-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows unsafe script: %q", csp)
	}
	if r.headers.Get("Referrer-Policy") != "no-referrer" || r.headers.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", r.headers)
	}
	start := strings.Index(r.raw, "<script>") + len("<script>")
	end := strings.Index(r.raw, "</script>")
	sum := sha256.Sum256([]byte(r.raw[start:end]))
	if !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") || strings.Count(r.raw, "<script") != 1 {
		t.Errorf("the page's script is not the one the CSP allows")
	}
	for _, absent := range []string{"<header", "<nav", "<a "} {
		if strings.Contains(r.raw, absent) {
			t.Errorf("the embed page has %s", absent)
		}
	}
	bad := s.call(http.MethodGet, strings.TrimPrefix(strings.Replace(embedURL, "token=", "token=x", 1), s.srv.URL), "", nil)
	if bad.status != http.StatusUnauthorized || strings.Contains(bad.raw, "data-agent-id") || bad.headers.Get("Content-Security-Policy") == "" {
		t.Errorf("bad token: %d %s", bad.status, bad.raw)
	}
	missing := s.call(http.MethodGet, "/embed/00000000-0000-4000-8000-000000000000?token=x", "", nil)
	if missing.status != http.StatusNotFound && missing.status != http.StatusUnauthorized {
		t.Errorf("unknown agent: %d", missing.status)
	}
}
