package providers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"google.golang.org/genai"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// Gemini is Google's Gemini API (generateContent, streamGenerateContent)
// through its native SDK, google.golang.org/genai. The SDK's own retries ignore
// the server's wait, so the calls go through a transport that retries 429 and
// 5xx after what Retry-After or the error's RetryInfo asks, up to MaxRetries
// times; Timeout bounds each call, retries included.
type Gemini struct {
	client *genai.Client
	opts   Options
}

// NewGemini returns a Gemini provider. It always uses the Gemini API with
// o.APIKey (never Vertex AI, whatever GOOGLE_GENAI_USE_VERTEXAI says).
func NewGemini(o Options) (*Gemini, error) {
	cfg := &genai.ClientConfig{
		APIKey:      o.APIKey,
		Backend:     genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: retrying{base: http.DefaultTransport, retries: o.MaxRetries}},
		HTTPOptions: genai.HTTPOptions{BaseURL: o.BaseURL},
	}
	if o.Timeout > 0 {
		cfg.HTTPOptions.Timeout = &o.Timeout
	}
	client, err := genai.NewClient(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return &Gemini{client: client, opts: o}, nil
}

// Name is "gemini".
func (g *Gemini) Name() string { return "gemini" }

// localIDPrefix marks the IDs given here to calls the API sent without one:
// they are not sent back to it.
const localIDPrefix = "gemini-local-"

// request converts req into the model, contents and configuration of a
// generateContent call.
func (g *Gemini) request(req llm.Request) (string, []*genai.Content, *genai.GenerateContentConfig, error) {
	cfg := &genai.GenerateContentConfig{}
	if req.System != "" {
		cfg.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	if n := g.opts.maxTokens(req); n > 0 {
		cfg.MaxOutputTokens = int32(min(n, math.MaxInt32))
	}
	if t := g.opts.Temperature; t != nil {
		temperature := float32(*t)
		cfg.Temperature = &temperature
	}
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for _, t := range req.Tools {
			var schema map[string]any
			if err := json.Unmarshal(t.Schema, &schema); err != nil {
				return "", nil, nil, fmt.Errorf("gemini: tool %s schema: %w", t.Name, err)
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{
				Name: t.Name, Description: t.Description, ParametersJsonSchema: schema,
			})
		}
		cfg.Tools = []*genai.Tool{tool}
	}
	// Function responses name their function: the calls' names by ID.
	names := map[string]string{}
	var contents []*genai.Content
	for _, m := range req.Messages {
		switch m.Role {
		case llm.User:
			contents = append(contents, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{{Text: m.Content}}})
		case llm.Assistant:
			var parts []*genai.Part
			if m.Content != "" {
				parts = append(parts, &genai.Part{Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				var args map[string]any
				if err := json.Unmarshal(tc.Args, &args); err != nil {
					args = map[string]any{}
				}
				parts = append(parts, &genai.Part{
					FunctionCall:     &genai.FunctionCall{ID: apiID(tc.ID), Name: tc.Name, Args: args},
					ThoughtSignature: tc.Signature,
				})
			}
			if len(parts) > 0 { // the API refuses a turn without parts
				contents = append(contents, &genai.Content{Role: genai.RoleModel, Parts: parts})
			}
		case llm.ToolRole:
			name, ok := names[m.ToolCallID]
			if !ok {
				return "", nil, nil, fmt.Errorf("gemini: tool result %s answers no call of the conversation", m.ToolCallID)
			}
			response := map[string]any{"output": m.Content}
			if m.IsError {
				response = map[string]any{"error": m.Content}
			}
			part := &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: apiID(m.ToolCallID), Name: name, Response: response}}
			// The results of one turn's calls go back in one user turn.
			if n := len(contents); n > 0 && functionResponses(contents[n-1]) {
				contents[n-1].Parts = append(contents[n-1].Parts, part)
			} else {
				contents = append(contents, &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{part}})
			}
		default:
			return "", nil, nil, fmt.Errorf("gemini: unknown role %q", m.Role)
		}
	}
	return g.opts.model("gemini", req), contents, cfg, nil
}

// apiID is the ID to send the API for a call: none for one it sent without.
func apiID(id string) string {
	if strings.HasPrefix(id, localIDPrefix) {
		return ""
	}
	return id
}

func functionResponses(c *genai.Content) bool {
	if c.Role != genai.RoleUser || len(c.Parts) == 0 {
		return false
	}
	for _, p := range c.Parts {
		if p.FunctionResponse == nil {
			return false
		}
	}
	return true
}

// geminiReply accumulates a response, whole or streamed chunk by chunk.
type geminiReply struct {
	res llm.Response
}

// add adds a response (a chunk, when streaming) and returns its text.
func (r *geminiReply) add(resp *genai.GenerateContentResponse) (string, error) {
	if resp.ModelVersion != "" {
		r.res.Model = resp.ModelVersion
	}
	if u := resp.UsageMetadata; u != nil {
		// Streamed chunks carry the usage so far: the last one the whole.
		// Thinking is billed as output.
		r.res.Usage = llm.Usage{
			InputTokens:  int(u.PromptTokenCount + u.ToolUsePromptTokenCount),
			OutputTokens: int(u.CandidatesTokenCount + u.ThoughtsTokenCount),
		}
	}
	if len(resp.Candidates) == 0 {
		if f := resp.PromptFeedback; f != nil && f.BlockReason != "" {
			return "", fmt.Errorf("gemini: the prompt was blocked (%s) %s", f.BlockReason, f.BlockReasonMessage)
		}
		return "", nil
	}
	c := resp.Candidates[0]
	if c.FinishReason != "" {
		r.res.StopReason = string(c.FinishReason)
	}
	if c.Content == nil {
		return "", nil
	}
	var text strings.Builder
	for _, p := range c.Content.Parts {
		switch {
		case p.Thought: // a thought summary, not the answer
		case p.FunctionCall != nil:
			args, err := json.Marshal(p.FunctionCall.Args)
			if err != nil || p.FunctionCall.Args == nil {
				args = []byte(`{}`)
			}
			id := p.FunctionCall.ID
			if id == "" {
				id = localIDPrefix + randomHex()
			}
			r.res.ToolCalls = append(r.res.ToolCalls, llm.ToolCall{ID: id, Name: p.FunctionCall.Name, Args: args, Signature: p.ThoughtSignature})
		case p.Text != "":
			text.WriteString(p.Text)
		}
	}
	r.res.Content += text.String()
	return text.String(), nil
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Chat calls generateContent.
func (g *Gemini) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	model, contents, cfg, err := g.request(req)
	if err != nil {
		return llm.Response{}, err
	}
	resp, err := g.client.Models.GenerateContent(ctx, model, contents, cfg)
	if err != nil {
		return llm.Response{}, fmt.Errorf("gemini: %w", err)
	}
	r := geminiReply{res: llm.Response{Model: model}}
	if _, err := r.add(resp); err != nil {
		return llm.Response{}, err
	}
	return r.res, nil
}

// Stream calls streamGenerateContent (server-sent events).
func (g *Gemini) Stream(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	model, contents, cfg, err := g.request(req)
	if err != nil {
		return nil, err
	}
	ch := make(chan llm.Event, 16)
	go func() {
		defer close(ch)
		r := geminiReply{res: llm.Response{Model: model}}
		for chunk, err := range g.client.Models.GenerateContentStream(ctx, model, contents, cfg) {
			if err != nil {
				ch <- llm.Event{Type: llm.Failed, Err: fmt.Errorf("gemini: %w", err)}
				return
			}
			text, err := r.add(chunk)
			if err != nil {
				ch <- llm.Event{Type: llm.Failed, Err: err}
				return
			}
			if text != "" {
				ch <- llm.Event{Type: llm.TextDelta, Text: text}
			}
		}
		for i := range r.res.ToolCalls {
			ch <- llm.Event{Type: llm.ToolCallDone, ToolCall: &r.res.ToolCalls[i]}
		}
		res := r.res
		ch <- llm.Event{Type: llm.Done, Response: &res}
	}()
	return ch, nil
}
