package providers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// OpenAI is the OpenAI chat completions API through the native SDK, or any
// compatible endpoint (LiteLLM, vLLM…) through BaseURL. The SDK retries 429 and
// 5xx with backoff, honouring retry-after, up to MaxRetries times.
type OpenAI struct {
	client openai.Client
	opts   Options
}

// NewOpenAI returns an OpenAI provider.
func NewOpenAI(o Options) *OpenAI {
	opts := []option.RequestOption{option.WithAPIKey(o.APIKey), option.WithMaxRetries(o.MaxRetries), option.WithRequestTimeout(o.Timeout)}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	return &OpenAI{client: openai.NewClient(opts...), opts: o}
}

// Name is "openai".
func (o *OpenAI) Name() string { return "openai" }

func (o *OpenAI) params(req llm.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(o.opts.model("openai", req))}
	if n := o.opts.maxTokens(req); n > 0 {
		p.MaxCompletionTokens = openai.Int(int64(n))
	}
	if t := o.opts.Temperature; t != nil {
		p.Temperature = openai.Float(*t)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.User:
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case llm.Assistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Args)},
				}})
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case llm.ToolRole:
			content := m.Content
			if m.IsError {
				content = "ERROR: " + content
			}
			p.Messages = append(p.Messages, openai.ToolMessage(content, m.ToolCallID))
		default:
			return p, fmt.Errorf("openai: unknown role %q", m.Role)
		}
	}
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if err := json.Unmarshal(t.Schema, &params); err != nil {
			return p, fmt.Errorf("openai: tool %s schema: %w", t.Name, err)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  params,
		}))
	}
	return p, nil
}

func fromOpenAI(c *openai.ChatCompletion) llm.Response {
	res := llm.Response{
		Model: c.Model,
		Usage: llm.Usage{InputTokens: int(c.Usage.PromptTokens), OutputTokens: int(c.Usage.CompletionTokens)},
	}
	if len(c.Choices) == 0 {
		return res
	}
	choice := c.Choices[0]
	res.Content = choice.Message.Content
	res.StopReason = choice.FinishReason
	for _, tc := range choice.Message.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage(`{}`)
		}
		res.ToolCalls = append(res.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	return res
}

// Chat sends one request.
func (o *OpenAI) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	p, err := o.params(req)
	if err != nil {
		return llm.Response{}, err
	}
	c, err := o.client.Chat.Completions.New(ctx, p)
	if err != nil {
		return llm.Response{}, fmt.Errorf("openai: %w", err)
	}
	return fromOpenAI(c), nil
}

// Stream sends one request and streams the reply.
func (o *OpenAI) Stream(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := o.client.Chat.Completions.NewStreaming(ctx, p)
	ch := make(chan llm.Event, 16)
	go func() {
		defer close(ch)
		defer func() { _ = stream.Close() }()
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			chunk := stream.Current()
			acc.AddChunk(chunk)
			if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
				ch <- llm.Event{Type: llm.TextDelta, Text: chunk.Choices[0].Delta.Content}
			}
		}
		if err := stream.Err(); err != nil {
			ch <- llm.Event{Type: llm.Failed, Err: fmt.Errorf("openai: %w", err)}
			return
		}
		res := fromOpenAI(&acc.ChatCompletion)
		for i := range res.ToolCalls {
			ch <- llm.Event{Type: llm.ToolCallDone, ToolCall: &res.ToolCalls[i]}
		}
		ch <- llm.Event{Type: llm.Done, Response: &res}
	}()
	return ch, nil
}
