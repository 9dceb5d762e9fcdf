package providers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// OpenAI is the chat completions API through OpenAI's native SDK: OpenAI's
// own, any endpoint compatible with it (LiteLLM…) through BaseURL, and, in
// their dialects, Mistral's and local servers' (NewMistral,
// NewOpenAICompatible). The SDK retries 429 and 5xx with backoff, honouring
// retry-after, up to MaxRetries times.
type OpenAI struct {
	client  openai.Client
	opts    Options
	dialect dialect
}

// dialect is how a server of the chat completions API differs from OpenAI's.
type dialect struct {
	// name is the provider's name, and its column in the model table.
	name string
	// maxTokens sends the bound on a reply as max_tokens, which Mistral and
	// local servers read (Mistral refuses max_completion_tokens, Ollama and
	// llama.cpp ignore it), instead of OpenAI's max_completion_tokens.
	maxTokens bool
	// noStreamOptions leaves out stream_options, which Mistral refuses (it
	// sends the usage at the end of a stream unasked).
	noStreamOptions bool
	// elsewhere is a server that is not OpenAI's: the OPENAI_* variables the
	// SDK reads (key, organization, project, base URL) are not sent to it.
	elsewhere bool
}

// Endpoints of the providers speaking the chat completions API.
const (
	MistralBaseURL = "https://api.mistral.ai/v1"
	OllamaBaseURL  = "http://localhost:11434/v1"
)

// NewOpenAI returns an OpenAI provider.
func NewOpenAI(o Options) *OpenAI {
	return newChat(o, dialect{name: "openai"})
}

// NewMistral returns a Mistral provider: Mistral's chat completions API
// (MistralBaseURL unless o.BaseURL says otherwise), which is OpenAI's but for
// max_tokens and refusing fields it does not know.
func NewMistral(o Options) *OpenAI {
	o.BaseURL = cmp.Or(o.BaseURL, MistralBaseURL)
	return newChat(o, dialect{name: "mistral", maxTokens: true, noStreamOptions: true, elsewhere: true})
}

// NewOpenAICompatible returns a provider named name for a local server of the
// chat completions API at o.BaseURL (Ollama's /v1, vLLM, llama.cpp, LM
// Studio…): max_tokens, and no key unless o.APIKey has one.
func NewOpenAICompatible(name string, o Options) *OpenAI {
	return newChat(o, dialect{name: name, maxTokens: true, elsewhere: true})
}

func newChat(o Options, d dialect) *OpenAI {
	opts := []option.RequestOption{option.WithAPIKey(o.APIKey), option.WithMaxRetries(o.MaxRetries)}
	if o.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(o.Timeout))
	}
	if o.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(o.BaseURL))
	}
	if d.elsewhere {
		// WithAPIKey above replaced OPENAI_API_KEY (with none, if o has none).
		opts = append(opts, option.WithHeaderDel("OpenAI-Organization"), option.WithHeaderDel("OpenAI-Project"))
	}
	return &OpenAI{client: openai.NewClient(opts...), opts: o, dialect: d}
}

// Name is the provider's name: "openai", "mistral", "ollama"….
func (o *OpenAI) Name() string { return o.dialect.name }

func (o *OpenAI) params(req llm.Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(o.opts.model(o.dialect.name, req))}
	if n := o.opts.maxTokens(req); n > 0 && o.dialect.maxTokens {
		p.MaxTokens = openai.Int(int64(n))
	} else if n > 0 {
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
			return p, fmt.Errorf("%s: unknown role %q", o.dialect.name, m.Role)
		}
	}
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if err := json.Unmarshal(t.Schema, &params); err != nil {
			return p, fmt.Errorf("%s: tool %s schema: %w", o.dialect.name, t.Name, err)
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
		return llm.Response{}, fmt.Errorf("%s: %w", o.dialect.name, err)
	}
	return fromOpenAI(c), nil
}

// Stream sends one request and streams the reply.
func (o *OpenAI) Stream(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	p, err := o.params(req)
	if err != nil {
		return nil, err
	}
	if !o.dialect.noStreamOptions {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
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
			ch <- llm.Event{Type: llm.Failed, Err: fmt.Errorf("%s: %w", o.dialect.name, err)}
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
