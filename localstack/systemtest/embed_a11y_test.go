package systemtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/remote-agents/remote-agents/shared/config"
)

// axeSource is axe-core's browser build, from the npm package make test
// installs (localstack/package.json).
func axeSource(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core (npm ci in localstack/): %v", err)
	}
	return string(src)
}

// axeViolation is what axe reports of one rule a page breaks.
type axeViolation struct {
	ID    string `json:"id"`
	Help  string `json:"help"`
	Nodes []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axeCheck runs axe-core in the tab, in light and in dark, and fails the test
// with every violation it finds in either (WCAG 2.x A and AA, and axe's best
// practices).
func axeCheck(t *testing.T, tab context.Context, state string) {
	t.Helper()
	for _, scheme := range []string{"light", "dark"} {
		inBrowser(t, tab, 5*time.Second, emulateMedia(&emulation.MediaFeature{Name: "prefers-color-scheme", Value: scheme}))
		raw := value(t, tab, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then((r) => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
		var violations []axeViolation
		if err := json.Unmarshal([]byte(raw), &violations); err != nil {
			t.Fatalf("axe's answer: %v: %s", err, raw)
		}
		for _, v := range violations {
			var where []string
			for _, n := range v.Nodes {
				where = append(where, n.HTML)
			}
			t.Errorf("%s, %s: axe %s (%s) on %s", state, scheme, v.ID, v.Help, strings.Join(where, " | "))
		}
		if state == "working" || state == "ended" {
			saveArtifact(t, "embed-a11y-"+state+"-"+scheme+".png", value(t, tab, chromedp.FullScreenshot(100)))
		}
	}
	inBrowser(t, tab, 5*time.Second, emulateMedia())
}

// The embed view has no accessibility violations axe-core can find, in light
// and dark, in each of its states: empty, working (a tool call, an answer
// with code), a question and a request for values, an error, ended. Every
// control is reachable by keyboard (the attach button too), the code block
// and the thread can be scrolled by keyboard, a failed tool call says its
// error once, tool calls read as what the agent did, and once the agent
// ended the composer is disabled and says why.
func TestEmbedViewIsAccessible(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) { c.CreationTimeout = 20 * time.Second }))
	id, tok, sb, _ := s.readySandbox(t, createBody("Look at the report, please."))
	tab := browser(t)
	inBrowser(t, tab, 30*time.Second,
		chromedp.Navigate(s.srv.URL+"/embed/"+id+"?token="+tok+"&file_upload=1&context_usage=1&voice_mic=1"),
		voidPoll(`document.getElementById("app").dataset.connection === "open"`, 15*time.Second),
	)
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](axeSource(t))); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	axeCheck(t, tab, "empty")

	// Tab walks every control: the thread, the attach button, the composer,
	// the microphone (disabled where the browser has no speech recognition,
	// so skipped), send.
	order := value(t, tab, chromedp.Evaluate[[]string](`(() => {
  const all = [...document.querySelectorAll('a[href], button, input, textarea, select, summary, [tabindex]')]
    .filter((e) => !e.disabled && e.tabIndex >= 0 && e.checkVisibility());
  return all.map((e) => e.dataset.role || e.tagName.toLowerCase());
})()`))
	if strings.Join(order, ",") != "thread,attach,composer,send" && strings.Join(order, ",") != "thread,attach,composer,mic,send" {
		t.Errorf("keyboard order %v, want the thread, attach, composer, (mic), send", order)
	}
	// The attach button opens the file chooser: it clicks the file input.
	inBrowser(t, tab, 10*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-role="file-input"]').addEventListener("click", (e) => { e.preventDefault(); window.chose = true; })`),
		chromedp.Focus(chromedp.CSS(`[data-role="attach"]`)),
		chromedp.KeyEvent(" "),
		voidPoll(`window.chose === true`, 5*time.Second),
	)

	// Working: a tool call and an answer with a code block.
	s.appendEvents(t, id, sb,
		event("state.changed", map[string]any{"state": "working"}),
		event("agent.message", map[string]any{"text": "Let me look.", "tool_calls": 1}),
		event("tool.call", map[string]any{"tool_call_id": "c1", "tool": "read", "args": `{"path":"reports/q3.md"}`, "is_error": false, "output": "# Q3\nRevenue grew."}),
		event("agent.message", map[string]any{"text": "Here is how to print it:\n\n```go\n// print the report\nfmt.Println(\"Q3\", 42)\n```", "tool_calls": 0}),
	)
	inBrowser(t, tab, 15*time.Second, voidPoll(`document.querySelector('[data-role="copy"]') !== null`, 10*time.Second))
	chip := value(t, tab, chromedp.Evaluate[string](`document.querySelector('[data-role="tool-call"] summary').textContent`))
	if chip != "Read a file reports/q3.md · done" {
		t.Errorf("tool chip %q, want what the agent did, on what", chip)
	}
	code := value(t, tab, chromedp.Evaluate[[]string](`(() => {
  const pre = document.querySelector("li.agent pre"), code = pre.querySelector("code");
  return [String(pre.tabIndex), code.textContent, [...code.querySelectorAll("span")].map((s) => s.className + ":" + s.textContent).join(" ")];
})()`))
	if code[0] != "0" || code[1] != "// print the report\nfmt.Println(\"Q3\", 42)\n" ||
		code[2] != `tok-comment:// print the report tok-string:"Q3" tok-number:42` {
		t.Errorf("code block: tabindex %s, text %q, tokens %q", code[0], code[1], code[2])
	}
	axeCheck(t, tab, "working")

	// A question, and a request for values.
	s.appendEvents(t, id, sb,
		event("agent.question", map[string]any{"question_id": "q1", "text": "Which quarter?", "options": []any{map[string]any{"id": "q3", "label": "Q3"}, map[string]any{"id": "q4", "label": "Q4"}}}),
		event("tool.call", map[string]any{"tool_call_id": "c2", "tool": "ask_user", "args": `{"question":"Which quarter?"}`, "is_error": false, "output": "Asked the user (question q1). Their answer will arrive as a message; end your turn now."}),
		event("env.request", map[string]any{"tool_call_id": "c3", "keys": []any{map[string]any{"key": "REPORT_TOKEN", "description": "to read the reports", "type": "secret"}}}),
		event("state.changed", map[string]any{"state": "idle"}),
	)
	inBrowser(t, tab, 15*time.Second, voidPoll(`document.querySelector('[data-role="env-request"] input') !== null`, 10*time.Second))
	if text := value(t, tab, chromedp.Evaluate[string](`document.querySelector('[data-role="thread"]').textContent`)); strings.Contains(text, "end your turn") {
		t.Errorf("the thread shows text meant for the model: %q", text)
	}
	if label := value(t, tab, chromedp.Evaluate[string](`[...document.querySelector('[data-role="env-request"] input').labels].map((l) => l.textContent).join()`)); !strings.HasPrefix(label, "REPORT_TOKEN") {
		t.Errorf("the value's input is labelled %q", label)
	}
	axeCheck(t, tab, "question")

	// An error: a failed tool call, and the agent's error.
	s.appendEvents(t, id, sb,
		event("tool.call", map[string]any{"tool_call_id": "c4", "tool": "bash", "args": `{"command":"make report"}`, "is_error": true, "output": "The operation encountered an error. exit status 2"}),
		event("agent.error", map[string]any{"text": "The model could not be reached; try again."}),
	)
	inBrowser(t, tab, 15*time.Second, voidPoll(`document.querySelector('li.error[data-role="error"]') !== null`, 10*time.Second))
	if line := value(t, tab, chromedp.Evaluate[string](`document.querySelector('li.error[data-role="error"]').textContent`)); line != "The model could not be reached; try again." {
		t.Errorf("the agent's error reads %q, want its words once", line)
	}
	failed := value(t, tab, chromedp.Evaluate[[]string](`(() => {
  const li = document.querySelector('[data-role="tool-call"][data-tool="bash"]');
  return [li.querySelector("summary").textContent, li.querySelector('[data-role="tool-error"]').textContent, li.textContent];
})()`))
	if failed[0] != "Ran a command make report · failed" || failed[1] != "Error: exit status 2" || strings.Count(failed[2], "Error") != 1 || strings.Contains(failed[2], "operation encountered") {
		t.Errorf("failed tool call: summary %q, error line %q, all %q", failed[0], failed[1], failed[2])
	}
	axeCheck(t, tab, "error")

	// Ended: the composer is disabled, and says why.
	if r := s.shutdown(id, tok); r.status != 200 {
		t.Fatalf("shutdown: %d %s", r.status, r.raw)
	}
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ended", "reason": "shutdown"}); r.status != http.StatusOK {
		t.Fatalf("the sandbox's end: %d %s", r.status, r.raw)
	}
	inBrowser(t, tab, 30*time.Second, voidPoll(`document.querySelector('[data-role="composer"]').disabled`, 25*time.Second))
	closed := value(t, tab, chromedp.Evaluate[[]string](`(() => {
  const c = document.querySelector('[data-role="composer"]'), n = document.getElementById(c.getAttribute("aria-describedby"));
  return [String(document.querySelector('[data-role="send"]').disabled), String(document.querySelector('[data-role="attach"]').disabled), n ? n.textContent : "", String(n && n.checkVisibility())];
})()`))
	if closed[0] != "true" || closed[1] != "true" || !strings.Contains(closed[2], "ended") || closed[3] != "true" {
		t.Errorf("after the end: send disabled %s, attach disabled %s, note %q (visible %s)", closed[0], closed[1], closed[2], closed[3])
	}
	axeCheck(t, tab, "ended")
}
