package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/shared/sanitize"
)

// ScriptedNotice starts every reply the scripted provider makes up when its script
// is exhausted or absent, so nobody mistakes it for a model.
const ScriptedNotice = "[scripted provider: no LLM is configured]"

// ScriptStep is one line of a script: the reply to the next call. Text is
// its text; ToolCalls the tools it calls (an id is made up where none is
// given, args default to {}); Usage its tokens (default: estimated from the
// text); PieceMillis (piece_ms) how long Stream pauses between two pieces of
// the text, so that a script can show a reply being written (default 0: no
// pause).
type ScriptStep struct {
	Text      string `json:"text"`
	ToolCalls []struct {
		ID   string          `json:"id,omitempty"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"tool_calls,omitempty"`
	Usage       *Usage `json:"usage,omitempty"`
	PieceMillis int    `json:"piece_ms,omitempty"`
}

// Scripted replays a JSONL script, one reply per call, in order. When the script
// is exhausted (or there is none) it answers with ScriptedNotice and an echo of
// the last user message, without tool calls, so workflows still finish.
type Scripted struct {
	mu    sync.Mutex
	steps []ScriptStep
	next  int
	calls int
}

// NewScripted returns a provider replaying steps.
func NewScripted(steps []ScriptStep) *Scripted {
	return &Scripted{steps: steps}
}

// LoadScript reads a JSONL script file: one ScriptStep per line; blank lines and
// lines starting with # are skipped.
func LoadScript(path string) ([]ScriptStep, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	return ParseScript(raw)
}

// ParseScript parses a JSONL script.
func ParseScript(raw []byte) ([]ScriptStep, error) {
	var steps []ScriptStep
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var s ScriptStep
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("script line %d: %w", n, err)
		}
		for i, tc := range s.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("script line %d: tool call %d has no name", n, i)
			}
		}
		if s.PieceMillis < 0 {
			return nil, fmt.Errorf("script line %d: piece_ms is negative", n)
		}
		steps = append(steps, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("script: %w", err)
	}
	return steps, nil
}

// Name is "scripted".
func (s *Scripted) Name() string { return "scripted" }

// Calls returns how many calls were made.
func (s *Scripted) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Chat returns the next scripted reply.
func (s *Scripted) Chat(ctx context.Context, req Request) (Response, error) {
	res, _, err := s.reply(ctx, req)
	return res, err
}

// reply returns the next scripted reply and the pause between the pieces of
// its text.
func (s *Scripted) reply(ctx context.Context, req Request) (Response, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	in := estimateTokens(req)
	if s.next >= len(s.steps) {
		text := ScriptedNotice + " I received: " + sanitize.Clip(strings.Join(strings.Fields(lastUser(req.Messages)), " "), 200)
		return Response{Content: text, Usage: Usage{InputTokens: in, OutputTokens: len(text) / 4}, StopReason: "end_turn", Model: "scripted"}, 0, nil
	}
	step := s.steps[s.next]
	s.next++
	res := Response{Content: step.Text, StopReason: "end_turn", Model: "scripted"}
	for i, tc := range step.ToolCalls {
		id := tc.ID
		if id == "" {
			id = "call_" + strconv.Itoa(s.calls) + "_" + strconv.Itoa(i)
		}
		args := tc.Args
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		res.ToolCalls = append(res.ToolCalls, ToolCall{ID: id, Name: tc.Name, Args: args})
		res.StopReason = "tool_use"
	}
	if step.Usage != nil {
		res.Usage = *step.Usage
	} else {
		res.Usage = Usage{InputTokens: in, OutputTokens: len(step.Text)/4 + 1}
	}
	return res, time.Duration(step.PieceMillis) * time.Millisecond, nil
}

// Stream delivers the next scripted reply as events: the text in word-sized
// deltas (its step's PieceMillis apart), then the tool calls, then done. A
// ctx that ends first ends the stream with Failed.
func (s *Scripted) Stream(ctx context.Context, req Request) (<-chan Event, error) {
	res, pause, err := s.reply(ctx, req)
	if err != nil {
		return nil, err
	}
	ch := make(chan Event, 16)
	go func() {
		defer close(ch)
		first := true
		for _, w := range strings.SplitAfter(res.Content, " ") {
			if w == "" {
				continue
			}
			if !first && !wait(ctx, pause) {
				ch <- Event{Type: Failed, Err: ctx.Err()}
				return
			}
			first = false
			select {
			case ch <- Event{Type: TextDelta, Text: w}:
			case <-ctx.Done():
				ch <- Event{Type: Failed, Err: ctx.Err()}
				return
			}
		}
		for i := range res.ToolCalls {
			ch <- Event{Type: ToolCallDone, ToolCall: &res.ToolCalls[i]}
		}
		ch <- Event{Type: Done, Response: &res}
	}()
	return ch, nil
}

// wait waits d, and reports whether ctx is still alive.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func lastUser(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == User {
			return msgs[i].Content
		}
	}
	return ""
}

func estimateTokens(req Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, tc := range m.ToolCalls {
			n += len(tc.Args)
		}
	}
	return n/4 + 1
}
