package providers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// Anthropic is Claude through the native SDK. The SDK retries 429 and 5xx with
// backoff, honouring retry-after, up to MaxRetries times. It speaks API version
// 2026-10-21, which takes no temperature (it answers one with a 400): New
// refuses a configured temperature, and Options.Temperature is not sent.
type Anthropic struct {
	client anthropic.Client
	opts   Options
}

// NewAnthropic returns an Anthropic provider.
func NewAnthropic(o Options) *Anthropic {
	opts := []option.RequestOption{option.WithAPIKey(o.APIKey), option.WithMaxRetries(o.MaxRetries), option.WithRequestTimeout(o.Timeout)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	return &Anthropic{client: anthropic.NewClient(opts...), opts: o}
}

// Name is "anthropic".
func (a *Anthropic) Name() string { return "anthropic" }

func (a *Anthropic) params(req llm.Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(a.opts.model("anthropic", req)),
		MaxTokens: int64(cmp.Or(a.opts.maxTokens(req), fallbackMaxTokens)),
	}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.User:
			p.Messages = append(p.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Content)))
		case llm.Assistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, json.RawMessage(tc.Args), tc.Name))
			}
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		case llm.ToolRole:
			block := anthropic.NewToolResultBlock(m.ToolCallID, m.Content, m.IsError)
			// Consecutive tool results belong in one user turn.
			if n := len(p.Messages); n > 0 && isToolResults(p.Messages[n-1]) {
				p.Messages[n-1].OfUser.Content = append(p.Messages[n-1].OfUser.Content, block)
			} else {
				p.Messages = append(p.Messages, anthropic.NewUserMessage(block))
			}
		default:
			return p, fmt.Errorf("anthropic: unknown role %q", m.Role)
		}
	}
	for _, t := range req.Tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return p, fmt.Errorf("anthropic: tool %s schema: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required},
		}})
	}
	return p, nil
}

func isToolResults(m anthropic.MessageParam) bool {
	if m.OfUser == nil || len(m.OfUser.Content) == 0 {
		return false
	}
	for _, b := range m.OfUser.Content {
		if b.OfToolResult == nil {
			return false
		}
	}
	return true
}

func fromAnthropic(msg *anthropic.Message) llm.Response {
	res := llm.Response{
		StopReason: string(msg.StopReason),
		Model:      string(msg.Model),
		Usage:      llm.Usage{InputTokens: int(msg.Usage.InputTokens), OutputTokens: int(msg.Usage.OutputTokens)},
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			res.Content += b.Text
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			res.ToolCalls = append(res.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	return res
}

// Chat sends one request.
func (a *Anthropic) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	p, err := a.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	msg, err := a.client.Messages.New(ctx, p)
	if err != nil {
		return llm.Response{}, fmt.Errorf("anthropic: %w", err)
	}
	return fromAnthropic(msg), nil
}

// Stream sends one request and streams the reply.
func (a *Anthropic) Stream(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	p, err := a.params(req)
	if err != nil {
		return nil, err
	}
	stream := a.client.Messages.NewStreaming(ctx, p)
	ch := make(chan llm.Event, 16)
	go func() {
		defer close(ch)
		defer func() { _ = stream.Close() }()
		var msg anthropic.Message
		for stream.Next() {
			ev := stream.Current()
			if err := msg.Accumulate(ev); err != nil {
				ch <- llm.Event{Type: llm.Failed, Err: fmt.Errorf("anthropic stream: %w", err)}
				return
			}
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				ch <- llm.Event{Type: llm.TextDelta, Text: ev.Delta.Text}
			}
		}
		if err := stream.Err(); err != nil {
			ch <- llm.Event{Type: llm.Failed, Err: fmt.Errorf("anthropic: %w", err)}
			return
		}
		res := fromAnthropic(&msg)
		for i := range res.ToolCalls {
			ch <- llm.Event{Type: llm.ToolCallDone, ToolCall: &res.ToolCalls[i]}
		}
		ch <- llm.Event{Type: llm.Done, Response: &res}
	}()
	return ch, nil
}
