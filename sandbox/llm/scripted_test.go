package llm_test

import (
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

func TestScriptedReplaysInOrderThenSaysSo(t *testing.T) {
	t.Parallel()
	steps, err := llm.ParseScript([]byte(`# a script
{"text":"looking","tool_calls":[{"name":"read","args":{"path":"a.txt"}}]}

{"text":"done","usage":{"input_tokens":7,"output_tokens":3}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := llm.NewScripted(steps)
	req := llm.Request{Messages: []llm.Message{{Role: llm.User, Content: "Summarise   the\nrepo"}}}
	first, err := p.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.Content != "looking" || len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "read" ||
		string(first.ToolCalls[0].Args) != `{"path":"a.txt"}` || first.ToolCalls[0].ID == "" || first.StopReason != "tool_use" {
		t.Errorf("first reply %+v", first)
	}
	second, _ := p.Chat(t.Context(), req)
	if second.Content != "done" || second.Usage != (llm.Usage{InputTokens: 7, OutputTokens: 3}) {
		t.Errorf("second reply %+v", second)
	}
	third, _ := p.Chat(t.Context(), req)
	if !strings.HasPrefix(third.Content, llm.ScriptedNotice) || !strings.Contains(third.Content, "Summarise the repo") || len(third.ToolCalls) != 0 {
		t.Errorf("exhausted reply %+v", third)
	}
	if p.Calls() != 3 {
		t.Errorf("calls = %d", p.Calls())
	}
}

func TestScriptedStream(t *testing.T) {
	t.Parallel()
	steps, _ := llm.ParseScript([]byte(`{"text":"hello there world","tool_calls":[{"name":"ls"}]}`))
	ch, err := llm.NewScripted(steps).Stream(t.Context(), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var calls int
	var done *llm.Response
	for e := range ch {
		switch e.Type {
		case llm.TextDelta:
			text.WriteString(e.Text)
		case llm.ToolCallDone:
			calls++
		case llm.Done:
			done = e.Response
		}
	}
	if text.String() != "hello there world" || calls != 1 || done == nil || string(done.ToolCalls[0].Args) != "{}" {
		t.Errorf("streamed %q, %d calls, done %+v", text.String(), calls, done)
	}
}

func TestParseScriptErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`{"text":`, `{"txt":"typo"}`, `{"tool_calls":[{"args":{}}]}`} {
		if _, err := llm.ParseScript([]byte(bad)); err == nil {
			t.Errorf("ParseScript(%q) accepted", bad)
		}
	}
}
