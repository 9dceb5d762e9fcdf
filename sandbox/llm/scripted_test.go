package llm_test

import (
	"context"
	"errors"
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
	for _, bad := range []string{`{"text":`, `{"txt":"typo"}`, `{"tool_calls":[{"args":{}}]}`, `{"text":"x","piece_ms":-1}`} {
		if _, err := llm.ParseScript([]byte(bad)); err == nil {
			t.Errorf("ParseScript(%q) accepted", bad)
		}
	}
}

// TestScriptedStreamPaces: a step's piece_ms spaces its pieces: one comes,
// then nothing until the pause is over; a ctx ended during a pause ends the
// stream with Failed.
func TestScriptedStreamPaces(t *testing.T) {
	t.Parallel()
	steps, err := llm.ParseScript([]byte(`{"text":"one two three","piece_ms":3600000}`))
	if err != nil || steps[0].PieceMillis != 3600000 {
		t.Fatalf("%+v, %v", steps, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := llm.NewScripted(steps).Stream(ctx, llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if e := <-ch; e.Type != llm.TextDelta || e.Text != "one " {
		t.Fatalf("first event %+v", e)
	}
	// The next piece is an hour away: nothing is there to read.
	select {
	case e := <-ch:
		t.Fatalf("%+v came during the pause", e)
	default:
	}
	cancel()
	e, ok := <-ch
	if !ok || e.Type != llm.Failed || !errors.Is(e.Err, context.Canceled) {
		t.Fatalf("after the cancel: %+v", e)
	}
	if _, ok := <-ch; ok {
		t.Error("the stream went on after Failed")
	}
}

// TestScriptedStreamPieces: with a short pause every piece still comes, one
// word each, and the reply is whole.
func TestScriptedStreamPieces(t *testing.T) {
	t.Parallel()
	steps, _ := llm.ParseScript([]byte(`{"text":"one two three","piece_ms":1}`))
	ch, err := llm.NewScripted(steps).Stream(t.Context(), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	var done *llm.Response
	for e := range ch {
		switch e.Type {
		case llm.TextDelta:
			pieces = append(pieces, e.Text)
		case llm.Done:
			done = e.Response
		}
	}
	if strings.Join(pieces, "|") != "one |two |three" || done == nil || done.Content != "one two three" {
		t.Errorf("pieces %q, done %+v", pieces, done)
	}
}
