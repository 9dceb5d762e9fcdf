package systemtest_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// appendEvents appends events to session id as its sandbox (token sb) would.
func (s *stack) appendEvents(t testing.TB, id, sb string, evs ...map[string]any) {
	t.Helper()
	list := make([]any, len(evs))
	for i, e := range evs {
		list[i] = e
	}
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/events", sb, map[string]any{"events": list}); r.status != http.StatusOK {
		t.Fatalf("append: %d %s", r.status, r.raw)
	}
}

func event(typ string, data map[string]any) map[string]any {
	return map[string]any{"type": typ, "data": data}
}

// emulateMedia sets (or, with no features, clears) the emulated CSS media
// features, such as prefers-color-scheme.
func emulateMedia(features ...*emulation.MediaFeature) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features})
		return err
	})
}

// The embed view as a chat: the initial prompt is the user's first message,
// a working indicator shows while the agent works, a tool call is one line
// that opens to its arguments and output (cut to a bound), the agent's
// Markdown renders (bold, a list, a code block) with scripts, handlers and
// script links neutralised, new messages reach a polite live region, and the
// composer is labelled, sends on Enter and breaks lines on Shift+Enter.
func TestEmbedViewChat(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	prompt := "Summarise **the** report <b>now</b>,\nplease"
	id, tok, sb, _ := s.readySandbox(t, createBody(prompt))
	tab := browser(t)
	inBrowser(t, tab, 30*time.Second,
		chromedp.Navigate(s.srv.URL+"/embed/"+id+"?token="+tok),
		voidPoll(`document.getElementById("app").dataset.connection === "open"`, 15*time.Second),
	)

	// The prompt, as the user wrote it, is the first message.
	first := value(t, tab, chromedp.Evaluate[[]string](`(() => { const li = document.querySelector('[data-role="thread"] li'); return [li.className, li.textContent, String(li.children.length)]; })()`))
	if first[0] != "user" || first[1] != prompt || first[2] != "0" {
		t.Errorf("first message %q, want the user's prompt %q as text", first, prompt)
	}
	indicatorShown := `(() => { const w = document.querySelector('[data-role="working"]'); return !w.hidden && w.getClientRects().length > 0; })()`
	if value(t, tab, chromedp.Evaluate[bool](indicatorShown)) {
		t.Error("the working indicator shows before the agent works")
	}

	// The agent works: the indicator shows, through a reply that calls a tool.
	s.appendEvents(t, id, sb, event("state.changed", map[string]any{"state": "working"}))
	inBrowser(t, tab, 15*time.Second, voidPoll(indicatorShown, 10*time.Second))
	saveArtifact(t, "embed-working.png", value(t, tab, chromedp.FullScreenshot(100)))
	long := strings.Repeat("0123456789", 400) // the sandbox's bound, 4000 characters
	s.appendEvents(t, id, sb,
		event("agent.message", map[string]any{"text": "Let me look.", "tool_calls": 1}),
		event("tool.call", map[string]any{"tool_call_id": "c1", "tool": "bash", "args": `{"command":"ls -la /workspace"}`, "is_error": false, "output": long}),
	)
	inBrowser(t, tab, 15*time.Second, voidPoll(`document.querySelector('[data-role="tool-call"]') !== null`, 10*time.Second))
	if !value(t, tab, chromedp.Evaluate[bool](indicatorShown)) {
		t.Error("the working indicator went away while the agent still works (a reply with tool calls)")
	}

	// The tool call: collapsed, one line with the tool and its status.
	collapsed := value(t, tab, chromedp.Evaluate[[]string](`(() => {
  const li = document.querySelector('[data-role="tool-call"]'), d = li.querySelector("details"), out = li.querySelector('[data-role="tool-output"]');
  return [String(d.open), li.querySelector("summary").textContent, String(out.checkVisibility())];
})()`))
	if collapsed[0] != "false" || collapsed[1] != "Ran a command ls -la /workspace · done" || collapsed[2] != "false" {
		t.Errorf("tool call not collapsed to its line: open %s, summary %q, output visible %s", collapsed[0], collapsed[1], collapsed[2])
	}
	saveArtifact(t, "embed-tool-call.png", value(t, tab, chromedp.FullScreenshot(100)))
	// It opens by keyboard, to its arguments and output, cut to a bound.
	inBrowser(t, tab, 10*time.Second,
		chromedp.Focus(chromedp.CSS(`[data-role="tool-call"] summary`)),
		chromedp.KeyEvent("\r"),
		voidPoll(`document.querySelector('[data-role="tool-call"] details').open`, 5*time.Second),
	)
	expanded := value(t, tab, chromedp.Evaluate[[]string](`(() => {
  const li = document.querySelector('[data-role="tool-call"]'), out = li.querySelector('[data-role="tool-output"]');
  return [li.querySelector('[data-role="tool-args"]').textContent, out.textContent, String(out.checkVisibility())];
})()`))
	if !strings.Contains(expanded[0], `"command": "ls -la /workspace"`) {
		t.Errorf("tool arguments %q", expanded[0])
	}
	if !strings.HasPrefix(expanded[1], long[:2000]) || !strings.HasSuffix(expanded[1], "… (2000 more characters)") || expanded[2] != "true" {
		t.Errorf("tool output not shown cut to 2000 characters: %d characters, ends %q, visible %s", len(expanded[1]), expanded[1][max(0, len(expanded[1])-40):], expanded[2])
	}
	saveArtifact(t, "embed-tool-call-expanded.png", value(t, tab, chromedp.FullScreenshot(100)))

	// The answer, in Markdown, with things that must not run or link out; a
	// sandbox's own html is not passed on.
	answer := "Here is **bold**, a list:\n\n- one\n- two\n\nand a code block:\n\n```go\nfmt.Println(\"<b>hi</b>\")\n```\n\n" +
		"<script>window.pwned = 1</script> <img src=x onerror=\"window.pwned = 2\"> [click me](javascript:window.pwned=3) [docs](https://example.com/docs)"
	s.appendEvents(t, id, sb,
		event("agent.message", map[string]any{"text": answer, "tool_calls": 0, "html": `<img src=x onerror="window.pwned = 4">`}),
		event("state.changed", map[string]any{"state": "idle"}),
	)
	inBrowser(t, tab, 15*time.Second,
		voidPoll(`document.querySelector('[data-role="status"]').textContent === "Idle"`, 10*time.Second),
	)
	md := value(t, tab, chromedp.Evaluate[map[string]any](`(() => {
  const li = [...document.querySelectorAll('[data-role="thread"] li.agent')].pop();
  return {
    bold: li.querySelector("strong") && li.querySelector("strong").textContent,
    items: [...li.querySelectorAll("ul > li")].map((x) => x.textContent),
    code: li.querySelector("pre > code") && li.querySelector("pre > code").textContent,
    text: li.textContent,
    scripts: document.querySelectorAll("script").length,
    images: li.querySelectorAll("img").length,
    handlers: [...li.querySelectorAll("*")].filter((e) => [...e.attributes].some((a) => a.name.startsWith("on"))).length,
    links: [...li.querySelectorAll("a")].map((a) => a.getAttribute("href") + " " + a.rel + " " + a.target),
    pwned: window.pwned === undefined ? "no" : String(window.pwned),
  };
})()`))
	if md["bold"] != "bold" || strings.Join(anyStrings(md["items"]), ",") != "one,two" || md["code"] != "fmt.Println(\"<b>hi</b>\")\n" {
		t.Errorf("Markdown not rendered: %v", md)
	}
	if md["scripts"] != float64(1) || md["images"] != float64(0) || md["handlers"] != float64(0) || md["pwned"] != "no" {
		t.Errorf("something of the answer runs: %v", md)
	}
	if links := anyStrings(md["links"]); len(links) != 1 || links[0] != "https://example.com/docs nofollow noreferrer noopener _blank" {
		t.Errorf("links %q, want only the https one, nofollow noopener in a new tab", links)
	}
	if text, _ := md["text"].(string); !strings.Contains(text, "<script>window.pwned = 1</script>") || !strings.Contains(text, "click me") {
		t.Errorf("the answer's HTML is not shown as text: %q", text)
	}
	if value(t, tab, chromedp.Evaluate[bool](indicatorShown)) {
		t.Error("the working indicator still shows after the answer and idle")
	}
	// The live region announced the answer, as read (not as Markdown).
	live := value(t, tab, chromedp.Evaluate[[]string](`(() => { const l = document.querySelector('[data-role="live"]'); return [l.getAttribute("aria-live"), l.textContent]; })()`))
	if live[0] != "polite" || !strings.Contains(live[1], "Here is bold, a list:") {
		t.Errorf("live region (aria-live %q) holds %q, not the answer", live[0], live[1])
	}
	saveArtifact(t, "embed-markdown.png", value(t, tab, chromedp.FullScreenshot(100)))
	inBrowser(t, tab, 5*time.Second, emulateMedia(&emulation.MediaFeature{Name: "prefers-color-scheme", Value: "dark"}))
	saveArtifact(t, "embed-markdown-dark.png", value(t, tab, chromedp.FullScreenshot(100)))
	inBrowser(t, tab, 5*time.Second, emulateMedia())

	// The composer: labelled; Shift+Enter breaks the line, Enter sends, focus
	// stays in the composer, and the indicator shows until the agent answers.
	label := value(t, tab, chromedp.Evaluate[string](`[...document.querySelector('[data-role="composer"]').labels].map((l) => l.textContent).join()`))
	if !strings.Contains(label, "Message the agent") {
		t.Errorf("composer label %q", label)
	}
	inBrowser(t, tab, 15*time.Second,
		chromedp.Focus(chromedp.CSS(`[data-role="composer"]`)),
		chromedp.KeyEvent("first line"),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.KeyEvent("second line"),
	)
	if v := value(t, tab, chromedp.Evaluate[string](`document.querySelector('[data-role="composer"]').value`)); v != "first line\nsecond line" {
		t.Errorf("after Shift+Enter the composer holds %q", v)
	}
	inBrowser(t, tab, 15*time.Second,
		chromedp.KeyEvent("\r"),
		voidPoll(`[...document.querySelectorAll('[data-role="thread"] li.user')].some((li) => li.textContent === "first line\nsecond line")`, 10*time.Second),
		voidPoll(indicatorShown, 5*time.Second),
		// The composer is disabled while the message posts: the thread may
		// show the message from the event stream before the post answers.
		voidPoll(`!document.querySelector('[data-role="composer"]').disabled`, 10*time.Second),
	)
	after := value(t, tab, chromedp.Evaluate[[]string](`[document.querySelector('[data-role="composer"]').value, document.activeElement.dataset.role || document.activeElement.tagName]`))
	if after[0] != "" || after[1] != "composer" {
		t.Errorf("after Enter: composer holds %q, focus on %q", after[0], after[1])
	}
	// The focused composer and, by keyboard, the Stop button (the agent
	// works) and the send button have a visible outline.
	outline := value(t, tab, chromedp.Evaluate[string](`getComputedStyle(document.activeElement).outlineStyle`))
	focused := `[document.activeElement.dataset.role || "", getComputedStyle(document.activeElement).outlineStyle]`
	inBrowser(t, tab, 5*time.Second, chromedp.KeyEvent("\t"))
	stop := value(t, tab, chromedp.Evaluate[[]string](focused))
	inBrowser(t, tab, 5*time.Second, chromedp.KeyEvent("\t"))
	send := value(t, tab, chromedp.Evaluate[[]string](focused))
	if outline != "solid" || stop[0] != "stop" || stop[1] != "solid" || send[0] != "send" || send[1] != "solid" {
		t.Errorf("focus outlines: composer %q, after Tab %q with %q, after another %q with %q", outline, stop[0], stop[1], send[0], send[1])
	}
	s.appendEvents(t, id, sb, event("agent.message", map[string]any{"text": "Noted.", "tool_calls": 0}))
	inBrowser(t, tab, 15*time.Second,
		voidPoll(`[...document.querySelectorAll('[data-role="live"] p')].some((p) => p.textContent.includes("Noted."))`, 10*time.Second),
		voidPoll(`document.querySelector('[data-role="working"]').hidden`, 5*time.Second),
	)
	// A destination its egress policy refused is a line of the thread.
	denied := map[string]any{"host": "example.com", "port": 443, "reason": "not_allowed", "message": "m"}
	if _, err := s.srv.Env.SessionStore().AppendEvents(t.Context(), id, 1, []session.Event{{Type: sandboxwire.TypeEgressDenied, Data: denied, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	inBrowser(t, tab, 15*time.Second,
		voidPoll(`(document.querySelector('[data-role="egress"]') || {}).textContent === "Blocked: example.com:443 is not allowed by this agent's network policy"`, 10*time.Second))
	// A spend cap that stops the agent says so in the thread and aloud.
	budget := map[string]any{"scope": "day", "unit": "usd", "limit": 0.05, "spent": 0.054, "message": "This app's model calls cost 0.0540 USD this day, its budget of 0.0500 USD."}
	if _, err := s.srv.Env.SessionStore().AppendEvents(t.Context(), id, 1, []session.Event{{Type: sandboxwire.TypeBudgetExceeded, Data: budget, At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	inBrowser(t, tab, 15*time.Second,
		voidPoll(`(document.querySelector('[data-role="budget"]') || {}).textContent === "`+budget["message"].(string)+`"`, 10*time.Second),
		voidPoll(`[...document.querySelectorAll('[data-role="live"] p')].some((p) => p.textContent.startsWith("Spending limit reached"))`, 5*time.Second),
	)
	saveArtifact(t, "embed-budget-exceeded.png", value(t, tab, chromedp.FullScreenshot(100)))
}

// The page follows prefers-color-scheme, takes an accent colour from the URL
// when it is a hex colour, and ignores any other accent; the style stays the
// one the CSP allows by hash.
func TestEmbedViewThemes(t *testing.T) {
	t.Parallel()
	path := script(t, map[string]any{"text": "Hello! **How** can I help?\n\n- a list\n- of two"})
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+path, "RA_NO_TMUX=1"))
	created := s.create(createBody("Hi there"))
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	embedURL := created.str("embed_url")
	tab := browser(t)
	colours := `(() => { const st = (s) => getComputedStyle(document.querySelector(s)); return [st("body").backgroundColor, st("body").color, st('[data-role="thread"] li.user').backgroundColor, st('[data-role="send"]').backgroundColor, st("body").display]; })()`
	load := func(u string) []string {
		t.Helper()
		inBrowser(t, tab, 30*time.Second,
			chromedp.Navigate(u),
			chromedp.WaitVisible(chromedp.CSS(`[data-role="thread"] li.agent strong`)),
			voidPoll(`document.querySelector('[data-role="working"]').hidden`, 10*time.Second),
		)
		return value(t, tab, chromedp.Evaluate[[]string](colours))
	}

	light := load(embedURL)
	saveArtifact(t, "embed-light.png", value(t, tab, chromedp.FullScreenshot(100)))
	inBrowser(t, tab, 5*time.Second, emulateMedia(&emulation.MediaFeature{Name: "prefers-color-scheme", Value: "dark"}))
	dark := value(t, tab, chromedp.Evaluate[[]string](colours))
	saveArtifact(t, "embed-dark.png", value(t, tab, chromedp.FullScreenshot(100)))
	if light[0] != "rgb(255, 255, 255)" || dark[0] == light[0] || dark[1] == light[1] {
		t.Errorf("dark mode: background %s and text %s, light: %s and %s", dark[0], dark[1], light[0], light[1])
	}
	inBrowser(t, tab, 5*time.Second, emulateMedia())

	const blue = "rgb(37, 99, 235)" // the default accent
	if light[2] != blue || light[3] != blue {
		t.Errorf("default accent: user message %s, send %s", light[2], light[3])
	}
	accented := load(embedURL + "&accent=" + url.QueryEscape("#aa3355"))
	if accented[2] != "rgb(170, 51, 85)" || accented[3] != "rgb(170, 51, 85)" {
		t.Errorf("accent #aa3355: user message %s, send %s", accented[2], accented[3])
	}
	saveArtifact(t, "embed-accent.png", value(t, tab, chromedp.FullScreenshot(100)))
	for _, hostile := range []string{"red", "#aa3355;}body{display:none", "#aa3355</style><script>alert(1)</script>", "url(https://example.com/x)", "#12345"} {
		got := load(embedURL + "&accent=" + url.QueryEscape(hostile))
		if got[2] != blue || got[3] != blue || got[4] == "none" {
			t.Errorf("accent %q: user message %s, send %s, body display %s", hostile, got[2], got[3], got[4])
		}
		if n := value(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("script, style").length`)); n != 2 {
			t.Errorf("accent %q: %d script and style elements", hostile, n)
		}
	}
	// The accented page's CSP is as strict (its style applies, above, so the
	// policy allows it by hash).
	checkEmbedHeaders(t, s, embedURL+"&accent=%23aa3355")
	if csp := s.call(http.MethodGet, strings.TrimPrefix(embedURL, s.srv.URL)+"&accent=%23aa3355", "", nil).headers.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'sha256-") || strings.Contains(csp, "unsafe") {
		t.Errorf("accented page: CSP %q", csp)
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
