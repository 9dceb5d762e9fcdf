package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// streamingAgent starts the stack with the real agent, whose model (the
// scripted provider) answers the first message with reply, a word every
// pieceMillis, and creates an agent; it returns the create's answer.
func streamingAgent(t *testing.T, reply string, pieceMillis int) (*stack, reply) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "script.jsonl")
	step, _ := json.Marshal(map[string]any{"text": reply, "piece_ms": pieceMillis})
	if err := os.WriteFile(script, append(step, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, withSandboxEnv("RA_LLM_SCRIPT="+script, "RA_NO_TMUX=1"))
	created := s.createReady(createBody("Tell me a story."))
	if created.status != http.StatusOK {
		t.Fatalf("create: %d %s", created.status, created.raw)
	}
	return s, created
}

// TestTheModelsReplyStreamsToViewers: the real agent streams its model's
// reply as it comes; a viewer gets it piece by piece, the pieces adding up
// to the stored message of the same id; a viewer that joins in the middle
// of it gets the text so far.
func TestTheModelsReplyStreamsToViewers(t *testing.T) {
	t.Parallel()
	words := strings.Fields("Once upon a time there was an agent that wrote its answers one word at a time so that everyone could read along")
	s, created := streamingAgent(t, strings.Join(words, " "), 300)
	id, tok := created.str("agent_id"), created.str("session_token")

	first := s.watch(t, id, tok, 0)
	first.next("sync")
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(s.work, "sandboxes", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	var text, messageID string
	pieces := 0
	for pieces < 3 {
		for _, e := range first.next("live")["events"].([]any) {
			ev := e.(map[string]any)
			if ev["type"] != "agent.message.delta" {
				continue
			}
			d := ev["data"].(map[string]any)
			if int(d["offset"].(float64)) != len([]rune(text)) {
				t.Fatalf("a piece at %v after %q", d["offset"], text)
			}
			messageID = d["message_id"].(string)
			text += d["text"].(string)
			pieces++
		}
	}
	// Mid-reply: a second viewer reads the text so far.
	second := s.watch(t, id, tok, 0)
	sync := second.next("sync")
	p, _ := sync["partial"].(map[string]any)
	if p == nil || p["message_id"] != messageID || !strings.HasPrefix(p["text"].(string), text) {
		t.Fatalf("the joiner's partial %v, want the text so far %q of %s", p, text, messageID)
	}
	for _, e := range sync["events"].([]any) {
		if d, _ := e.(map[string]any)["data"].(map[string]any); d["message_id"] == messageID {
			t.Fatalf("the reply was stored before it was written: %v", e)
		}
	}
	// The rest, then the stored message of the same id.
	for {
		f := first.next("events")
		var final map[string]any
		for _, e := range f["events"].([]any) {
			if ev := e.(map[string]any); ev["type"] == "agent.message" {
				final = ev["data"].(map[string]any)
			}
		}
		if final == nil {
			continue
		}
		if final["message_id"] != messageID || final["text"] != strings.Join(words, " ") {
			t.Fatalf("stored %v, want the reply %s", final, messageID)
		}
		break
	}
	for _, f := range first.seen {
		if f["type"] != "live" {
			continue
		}
		for _, e := range f["events"].([]any) {
			if d := e.(map[string]any)["data"].(map[string]any); d["message_id"] == messageID && int(d["offset"].(float64)) == len([]rune(text)) {
				text += d["text"].(string)
			}
		}
	}
	if text != strings.Join(words, " ") || pieces < 3 {
		t.Errorf("the pieces add up to %q, want the reply", text)
	}
}

// TestEmbedViewShowsTheReplyAsItIsWritten: in headless Chromium, the embed
// view shows the agent's reply in pieces before it is complete (a growing
// prefix of it, in a bubble marked as being written); a second page opened
// in the middle of the reply shows the text so far at once; both end with
// the one stored message, rendered, and no bubble left streaming. axe finds
// nothing wrong with a reply being written, in light or dark.
func TestEmbedViewShowsTheReplyAsItIsWritten(t *testing.T) {
	t.Parallel()
	words := strings.Fields(strings.Repeat("Streaming lets everyone read the answer while the agent is still writing it, word by word. ", 3))
	whole := strings.Join(words, " ")
	_, created := streamingAgent(t, whole, 400)
	streaming := `(() => { const b = document.querySelector('li.agent[data-streaming="true"]'); return b ? b.textContent : ""; })()`
	var texts []string
	grew := func(tab context.Context, min int) string {
		t.Helper()
		inBrowser(t, tab, 30*time.Second, voidPoll(fmt.Sprintf(`%s.length > %d`, streaming, min), 30*time.Second))
		got := value(t, tab, chromedp.Evaluate[string](streaming))
		if !strings.HasPrefix(whole, strings.TrimSpace(got)) || len(got) >= len(whole) {
			t.Fatalf("the reply being written shows %q, want a part of %q", got, whole)
		}
		return got
	}
	first := browser(t)
	inBrowser(t, first, 30*time.Second, chromedp.Navigate(created.str("embed_url")))
	texts = append(texts, grew(first, 0))
	texts = append(texts, grew(first, len(texts[0])))
	saveArtifact(t, "embed-streaming.png", value(t, first, chromedp.FullScreenshot(100)))

	// A page opened now shows the text so far at once, before more comes.
	second, cancel := chromedp.NewContext(first)
	defer cancel()
	if err := chromedp.Do(second); err != nil { // the tab, opened on a context that outlives each step
		t.Fatalf("open a second tab: %v", err)
	}
	inBrowser(t, second, 30*time.Second, chromedp.Navigate(created.str("embed_url")))
	joined := grew(second, 0)
	if len(joined) < len(texts[1]) {
		t.Errorf("the page opened mid-reply shows %q, less than the first page had before it opened (%q)", joined, texts[1])
	}
	if _, err := chromedp.Run(first, chromedp.Evaluate[chromedp.Void](axeSource(t))); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	axeCheck(t, first, "streaming")

	final := `(() => { const b = [...document.querySelectorAll('li.agent')]; return b.length === 1 && !b[0].hasAttribute("data-streaming") && b[0].querySelector("p") !== null ? b[0].textContent : ""; })()`
	for _, tab := range []context.Context{first, second} {
		inBrowser(t, tab, 40*time.Second, voidPoll(final+` !== ""`, 40*time.Second))
		if got := value(t, tab, chromedp.Evaluate[string](final)); !strings.Contains(got, whole) {
			t.Errorf("the stored reply shows %q, want %q", got, whole)
		}
	}
}
