package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/sandbox/gateway"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// event is an appended event, its data decoded generically.
type event struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// recorder plays the gateway, recording what a sandbox reports: its events, its
// live events and its status changes.
type recorder struct {
	mu     sync.Mutex
	events []event
	deltas []event
	states []string
	// order lists the types of the events and the live events, as they came.
	order []string
}

func (g *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch r.URL.Path {
	case "/sandbox/s1/events":
		var in struct{ Events []event }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g.events = append(g.events, in.Events...)
		for _, e := range in.Events {
			g.order = append(g.order, e.Type)
		}
	case "/sandbox/s1/deltas":
		var in struct{ Deltas []event }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Deltas) == 0 || len(in.Deltas) > sandboxwire.MaxDeltasPerPost {
			http.Error(w, fmt.Sprint("bad deltas ", err), http.StatusBadRequest)
			return
		}
		g.deltas = append(g.deltas, in.Deltas...)
		for _, e := range in.Deltas {
			g.order = append(g.order, e.Type)
		}
	case "/sandbox/s1/status":
		var in sandboxwire.StatusReport
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		g.states = append(g.states, string(in.State))
	default:
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write([]byte(`{}`))
}

// summary lists the events as type[:detail].
func (g *recorder) summary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var s []string
	for _, e := range g.events {
		switch e.Type {
		case "state.changed":
			s = append(s, e.Type+":"+fmt.Sprint(e.Data["state"]))
		case "agent.message":
			s = append(s, fmt.Sprintf("%s:%v", e.Type, e.Data["text"]))
		case "tool.call":
			s = append(s, fmt.Sprintf("%s:%v:%v", e.Type, e.Data["tool"], e.Data["is_error"]))
		default:
			s = append(s, e.Type)
		}
	}
	return strings.Join(s, " ")
}

// chat is a provider answering through a function; n counts the calls from 1.
type chat func(req llm.Request, n int) (llm.Response, error)

type fakeProvider struct {
	mu     sync.Mutex
	n      int
	answer chat
	// pieceLen, if set, is the length in bytes of the pieces Stream sends
	// (default: word by word).
	pieceLen int
}

func (p *fakeProvider) Name() string { return "fake" }

func (p *fakeProvider) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	return p.answer(req, n)
}

// Stream streams Chat's answer: its text in pieces, then done.
func (p *fakeProvider) Stream(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	res, err := p.Chat(ctx, req)
	if err != nil {
		return nil, err
	}
	pieces := strings.SplitAfter(res.Content, " ")
	if p.pieceLen > 0 {
		pieces = nil
		for text := res.Content; text != ""; text = text[min(p.pieceLen, len(text)):] {
			pieces = append(pieces, text[:min(p.pieceLen, len(text))])
		}
	}
	ch := make(chan llm.Event, len(pieces)+1)
	for _, piece := range pieces {
		ch <- llm.Event{Type: llm.TextDelta, Text: piece}
	}
	ch <- llm.Event{Type: llm.Done, Response: &res}
	close(ch)
	return ch, nil
}

// shellTools has one tool, "sh", whose output is its "out" argument; it fails
// when "fail" is true.
type shellTools struct{}

func (shellTools) Definitions() []llm.Tool {
	return []llm.Tool{{Name: "sh", Schema: json.RawMessage(`{"type":"object"}`)}}
}

func (shellTools) Run(_ context.Context, call llm.ToolCall) (llm.ToolResult, error) {
	var a struct {
		Out  string
		Fail bool
	}
	if err := json.Unmarshal(call.Args, &a); err != nil {
		return llm.ToolResult{}, err
	}
	return llm.ToolResult{Content: a.Out, IsError: a.Fail}, nil
}

func sh(out string, fail bool) llm.ToolCall {
	args, _ := json.Marshal(map[string]any{"out": out, "fail": fail})
	return llm.ToolCall{ID: "c", Name: "sh", Args: args}
}

// newConversation is a conversation of brain with a recorder for a gateway;
// secrets (nil: none) are the sandbox's.
func newConversation(t *testing.T, brain *Brain, secrets *redact.Secrets) (*conversation, *recorder) {
	t.Helper()
	gw := &recorder{}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	cl := gateway.New(srv.URL, "s1", "tok", secrets)
	return &conversation{brain: brain, cl: cl, secrets: secrets, system: "sys", msgs: []llm.Message{{Role: llm.User, Content: "hello"}},
		log: slog.New(slog.DiscardHandler)}, gw
}

func TestTurn(t *testing.T) {
	t.Parallel()
	tokens := llm.Usage{InputTokens: 10, OutputTokens: 5}
	tests := []struct {
		name       string
		answer     chat
		tokenLimit int
		wantErr    error
		wantEvents string
		wantRoles  string
	}{
		{
			name: "tools, then an answer",
			answer: func(_ llm.Request, n int) (llm.Response, error) {
				if n == 1 {
					return llm.Response{Content: "looking", ToolCalls: []llm.ToolCall{sh("a.txt", false), sh("cat: /etc/x.conf: No such file", true)}, Usage: tokens}, nil
				}
				return llm.Response{Content: "found it", Usage: tokens}, nil
			},
			wantEvents: "state.changed:working agent.message:looking tool.call:sh:false tool.call:sh:true agent.message:found it state.changed:idle",
			wantRoles:  "user assistant tool tool assistant",
		},
		{
			name:       "model unreachable",
			answer:     func(llm.Request, int) (llm.Response, error) { return llm.Response{}, errors.New("connection refused") },
			wantEvents: "state.changed:working agent.error state.changed:idle",
			wantRoles:  "user",
		},
		{
			name: "too many steps",
			answer: func(_ llm.Request, n int) (llm.Response, error) {
				return llm.Response{Content: "again", ToolCalls: []llm.ToolCall{sh("x", false)}}, nil
			},
			wantEvents: "state.changed:working" + strings.Repeat(" agent.message:again tool.call:sh:false", maxTurnCalls) + " agent.error state.changed:idle",
			wantRoles:  "user" + strings.Repeat(" assistant tool", maxTurnCalls),
		},
		{
			name: "token limit",
			answer: func(_ llm.Request, n int) (llm.Response, error) {
				return llm.Response{Content: "step", ToolCalls: []llm.ToolCall{sh("x", false)}, Usage: tokens}, nil
			},
			tokenLimit: 20, // 15, then 30
			wantErr:    errTokenLimit,
			wantEvents: "state.changed:working agent.message:step tool.call:sh:false agent.message:step session.token_limit",
			wantRoles:  "user assistant tool assistant",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, gw := newConversation(t, &Brain{Provider: &fakeProvider{answer: tt.answer}, Tools: shellTools{}, TokenLimit: tt.tokenLimit, ContextWindow: 1000}, nil)
			if err := c.turn(t.Context()); !errors.Is(err, tt.wantErr) {
				t.Errorf("turn: %v, want %v", err, tt.wantErr)
			}
			if got := gw.summary(); got != tt.wantEvents {
				t.Errorf("events\n%s\nwant\n%s", got, tt.wantEvents)
			}
			var roles []string
			for _, m := range c.msgs {
				roles = append(roles, string(m.Role))
			}
			if got := strings.Join(roles, " "); got != tt.wantRoles {
				t.Errorf("conversation %s, want %s", got, tt.wantRoles)
			}
		})
	}
}

func TestTurnsShareTheTokenBudget(t *testing.T) {
	t.Parallel()
	p := &fakeProvider{answer: func(_ llm.Request, n int) (llm.Response, error) {
		return llm.Response{Content: fmt.Sprint("answer ", n), Usage: llm.Usage{InputTokens: 6 * n, OutputTokens: 2}}, nil
	}}
	c, gw := newConversation(t, &Brain{Provider: p, Tools: shellTools{}, TokenLimit: 20, ContextWindow: 1000}, nil)
	if err := c.turn(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.msgs = append(c.msgs, llm.Message{Role: llm.User, Content: "and?"})
	if err := c.turn(t.Context()); !errors.Is(err, errTokenLimit) { // 8, then 8+14
		t.Fatalf("second turn: %v, want the token limit", err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	second := gw.events[len(gw.events)-2].Data
	usage, _ := second["usage"].(map[string]any)
	want := map[string]any{"input_tokens": 18.0, "output_tokens": 4.0, "context_tokens": 14.0, "context_window": 1000.0}
	if fmt.Sprint(usage) != fmt.Sprint(want) {
		t.Errorf("usage reported %v, want %v", usage, want)
	}
	limit := gw.events[len(gw.events)-1]
	if limit.Type != "session.token_limit" || limit.Data["limit"] != 20.0 || limit.Data["used"] != 22.0 {
		t.Errorf("last event %+v", limit)
	}
	if strings.Join(gw.states, " ") != "working idle working" {
		t.Errorf("states %v", gw.states)
	}
}

func TestToolEventsAreClippedAndFailuresSanitised(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("日本", maxEventChars) // multi-byte, twice as long as an event may hold
	p := &fakeProvider{answer: func(_ llm.Request, n int) (llm.Response, error) {
		if n == 1 {
			return llm.Response{ToolCalls: []llm.ToolCall{sh(long, false), sh("open /home/nobody/secret/config.yaml: permission denied", true)}}, nil
		}
		return llm.Response{Content: "ok"}, nil
	}}
	c, gw := newConversation(t, &Brain{Provider: p, Tools: tools.Sanitised{Tools: shellTools{}}}, nil)
	if err := c.turn(t.Context()); err != nil {
		t.Fatal(err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var outputs []string
	for _, e := range gw.events {
		if e.Type == "tool.call" {
			out, _ := e.Data["output"].(string)
			args, _ := e.Data["args"].(string)
			if !utf8.ValidString(out) || !utf8.ValidString(args) || utf8.RuneCountInString(args) > maxEventChars+1 {
				t.Errorf("tool.call event %.80q… not clipped on rune boundaries", args)
			}
			outputs = append(outputs, out)
		}
	}
	if len(outputs) != 2 || outputs[0] != long[:len(long)/2]+"…" {
		t.Fatalf("outputs not clipped to %d runes: %d outputs", maxEventChars, len(outputs))
	}
	if strings.Contains(outputs[1], "/home/nobody") {
		t.Errorf("failure not sanitised in the event: %q", outputs[1])
	}
	if model := c.msgs[3]; !model.IsError || strings.Contains(model.Content, "/home/nobody") || model.Content != outputs[1] {
		t.Errorf("failure not sanitised for the model: %+v", model)
	}
	if c.msgs[2].Content != long {
		t.Error("the model got a clipped tool output")
	}
}

// TestToolCallEventsCarryTheirCallID: a tool.call event names the model's call
// id, which is the tool_call_id of a gateway tool's callback record.
func TestToolCallEventsCarryTheirCallID(t *testing.T) {
	t.Parallel()
	p := &fakeProvider{answer: func(_ llm.Request, n int) (llm.Response, error) {
		if n == 1 {
			call := sh("x", false)
			call.ID = "call-42"
			return llm.Response{ToolCalls: []llm.ToolCall{call}}, nil
		}
		return llm.Response{Content: "done"}, nil
	}}
	c, gw := newConversation(t, &Brain{Provider: p, Tools: shellTools{}}, nil)
	if err := c.turn(t.Context()); err != nil {
		t.Fatal(err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var ids []any
	for _, e := range gw.events {
		if e.Type == sandboxwire.TypeToolCall {
			ids = append(ids, e.Data["tool_call_id"])
		}
	}
	if len(ids) != 1 || ids[0] != "call-42" {
		t.Errorf("tool.call events carry tool_call_id %v, want [call-42]", ids)
	}
}

// Defence in depth: a secret the sandbox knows that a tool's output, or the
// model's own text, carries anyway reaches neither the model nor the events.
func TestSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	const token, key, userValue = "rsb_the-sandbox-token-0123456789", "sk-ant-the-key-0123456789", `pa"ss-wörd-0123`
	secrets := redact.New(token, key)
	secrets.Add(userValue)
	p := &fakeProvider{answer: func(_ llm.Request, n int) (llm.Response, error) {
		if n == 1 {
			return llm.Response{Content: "Reading " + key, ToolCalls: []llm.ToolCall{
				sh("SANDBOX_MCP_AUTH_TOKEN="+token+"\nSTRIPE="+userValue, false), sh("auth failed for "+key, true)}}, nil
		}
		return llm.Response{Content: "done"}, nil
	}}
	c, gw := newConversation(t, &Brain{Provider: p, Tools: tools.Sanitised{Tools: shellTools{}, Secrets: secrets}}, secrets)
	if err := c.turn(t.Context()); err != nil {
		t.Fatal(err)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	raw, _ := json.Marshal(gw.events)
	for _, secret := range []string{token, key, userValue, "ss-w"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the events hold %q: %s", secret, raw)
		}
	}
	if !strings.Contains(string(raw), "SANDBOX_MCP_AUTH_TOKEN=[redacted]") || !strings.Contains(string(raw), "Reading [redacted]") {
		t.Errorf("events %s", raw)
	}
	for _, m := range c.msgs {
		if m.Role == llm.ToolRole && (strings.Contains(m.Content, token) || strings.Contains(m.Content, key) || strings.Contains(m.Content, userValue)) {
			t.Errorf("the model was shown a secret: %q", m.Content)
		}
	}
}

// messages returns, for each agent.message, its text and the text its deltas
// add up to, checking their offsets follow each other from 0; and the deltas
// of no agent.message.
func (g *recorder) messages(t *testing.T) (texts, streamed []string, stray int) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	byID := map[string]*strings.Builder{}
	for _, e := range g.deltas {
		if e.Type != sandboxwire.TypeAgentMessageDelta {
			continue
		}
		id, _ := e.Data["message_id"].(string)
		offset, _ := e.Data["offset"].(float64)
		text, _ := e.Data["text"].(string)
		b := byID[id]
		if b == nil {
			b = &strings.Builder{}
			byID[id] = b
		}
		if n := utf8.RuneCountInString(b.String()); int(offset) != n {
			t.Errorf("delta of %s at offset %v after %d code points", id, offset, n)
		}
		b.WriteString(text)
	}
	for _, e := range g.events {
		if e.Type != sandboxwire.TypeAgentMessage {
			continue
		}
		id, _ := e.Data["message_id"].(string)
		text, _ := e.Data["text"].(string)
		if id == "" {
			t.Errorf("agent.message %q without a message id", text)
		}
		texts = append(texts, text)
		if b := byID[id]; b != nil {
			streamed = append(streamed, b.String())
			delete(byID, id)
		} else {
			streamed = append(streamed, "")
		}
	}
	return texts, streamed, len(byID)
}

// TestTurnStreamsItsReplies: each reply streams as deltas of its own message
// id, which its agent.message carries, and which add up to its text before
// it is appended; each tool call is shown started before its tool.call is
// appended.
func TestTurnStreamsItsReplies(t *testing.T) {
	t.Parallel()
	p := &fakeProvider{answer: func(_ llm.Request, n int) (llm.Response, error) {
		switch n {
		case 1:
			call := sh("a.txt", false)
			call.ID = "c1"
			return llm.Response{Content: "Let me look — ça va vite.", ToolCalls: []llm.ToolCall{call}}, nil
		case 2:
			call := sh("b.txt", false)
			call.ID = "c2"
			return llm.Response{ToolCalls: []llm.ToolCall{call}}, nil // no text
		}
		return llm.Response{Content: "Found it in a.txt"}, nil
	}}
	c, gw := newConversation(t, &Brain{Provider: p, Tools: shellTools{}}, nil)
	if err := c.turn(t.Context()); err != nil {
		t.Fatal(err)
	}
	texts, streamed, stray := gw.messages(t)
	want := []string{"Let me look — ça va vite.", "", "Found it in a.txt"}
	if strings.Join(texts, "|") != strings.Join(want, "|") || strings.Join(streamed, "|") != strings.Join(want, "|") || stray != 0 {
		t.Errorf("messages %q streamed as %q (%d stray)", texts, streamed, stray)
	}
	gw.mu.Lock()
	defer gw.mu.Unlock()
	ids := map[any]bool{}
	for _, e := range gw.events {
		if e.Type == sandboxwire.TypeAgentMessage {
			ids[e.Data["message_id"]] = true
		}
	}
	if len(ids) != 3 {
		t.Errorf("message ids %v, want 3 distinct", ids)
	}
	var started []string
	for _, e := range gw.deltas {
		if e.Type == sandboxwire.TypeToolCallStarted {
			started = append(started, fmt.Sprint(e.Data["tool_call_id"], " ", e.Data["tool"], " ", e.Data["args"]))
		}
	}
	if want := []string{`c1 sh {"fail":false,"out":"a.txt"}`, `c2 sh {"fail":false,"out":"b.txt"}`}; strings.Join(started, "\n") != strings.Join(want, "\n") {
		t.Errorf("started %q, want %q", started, want)
	}
	// Live events of a step come before its stored event.
	order := strings.Join(gw.order, " ")
	order = regexp.MustCompile(`(agent\.message\.delta ?)+`).ReplaceAllString(order, "delta ")
	if want := "state.changed delta agent.message tool.call.started tool.call agent.message tool.call.started tool.call delta agent.message state.changed"; order != want {
		t.Errorf("order\n%s\nwant\n%s", order, want)
	}
}

// TestStreamedSecretsAreHidden: a secret the model writes, whatever pieces it
// comes in, is in no delta: they add up to the text its agent.message shows,
// redacted, though the gateway client itself knows no secret.
func TestStreamedSecretsAreHidden(t *testing.T) {
	t.Parallel()
	const key = "sk-ant-the-key-0123456789"
	secrets := redact.New(key, "rsb_the-sandbox-token-0123456789")
	for _, n := range []int{1, 3, 7, 100} {
		p := &fakeProvider{pieceLen: n, answer: func(llm.Request, int) (llm.Response, error) {
			return llm.Response{Content: "Reading " + key + " and sk-ant-the-k, not the key."}, nil
		}}
		c, gw := newConversation(t, &Brain{Provider: p, Tools: shellTools{}}, nil)
		c.secrets = secrets
		if err := c.turn(t.Context()); err != nil {
			t.Fatal(err)
		}
		texts, streamed, stray := gw.messages(t)
		want := "Reading [redacted] and sk-ant-the-k, not the key."
		if len(texts) != 1 || texts[0] != want || streamed[0] != want || stray != 0 {
			t.Errorf("pieces of %d: message %q streamed as %q", n, texts, streamed)
		}
		gw.mu.Lock()
		raw, _ := json.Marshal(gw.deltas)
		gw.mu.Unlock()
		if strings.Contains(string(raw), "0123456789") {
			t.Errorf("pieces of %d: the deltas hold the key: %s", n, raw)
		}
	}
}

// TestNothingIsPostedWhileNobodyWatches: a reply written while no viewer
// watches posts nothing; once one does, the reply so far goes out whole
// from offset 0, then piece by piece.
func TestNothingIsPostedWhileNobodyWatches(t *testing.T) {
	t.Parallel()
	c, gw := newConversation(t, &Brain{}, nil)
	var watched watchState
	view := &liveView{sender: c.cl.Live(t.Context(), c.log), secrets: c.secrets, watched: &watched}
	view.delta(t.Context(), "Once upon ")
	view.delta(t.Context(), "a time")
	view.sender.Flush()
	gw.mu.Lock()
	if len(gw.deltas) != 0 {
		t.Errorf("posted while nobody watched: %v", gw.deltas)
	}
	gw.mu.Unlock()
	watched.set(1, 2)
	watched.set(0, 1) // an older word: nobody watched
	view.delta(t.Context(), " there")
	view.sender.Flush()
	view.delta(t.Context(), " was")
	id := view.end()
	view.sender.Close()
	gw.mu.Lock()
	defer gw.mu.Unlock()
	var got []string
	for _, e := range gw.deltas {
		if e.Data["message_id"] != id {
			t.Errorf("a delta of %v, want %s", e.Data["message_id"], id)
		}
		got = append(got, fmt.Sprint(e.Data["offset"], ":", e.Data["text"]))
	}
	if want := "0:Once upon a time there|22: was"; strings.Join(got, "|") != want {
		t.Errorf("deltas %q, want %q", got, want)
	}
}
