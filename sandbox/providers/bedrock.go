package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/auth/bearer"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/remote-agents/remote-agents/sandbox/llm"
)

// Bedrock is Amazon Bedrock's Converse API: the natural provider inside AWS, where
// the task role authorises the calls and no API key exists to leak.
type Bedrock struct {
	client *bedrockruntime.Client
	opts   Options
}

// NewBedrock returns a Bedrock provider over cfg (region, credentials,
// endpoint); o's BaseURL is not used. Calls are signed with cfg's AWS
// credentials, or, when o has an APIKey, carry it as a bearer token instead:
// a Bedrock API key, or in a sandbox its token for the platform's model
// gateway, which signs the calls itself. Throttling and 5xx are retried with
// backoff that honours Retry-After.
func NewBedrock(cfg aws.Config, o Options) *Bedrock {
	client := bedrockruntime.NewFromConfig(cfg, func(bo *bedrockruntime.Options) {
		bo.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = o.MaxRetries + 1
			so.Backoff = retryAfter{fallback: retry.NewExponentialJitterBackoff(20 * time.Second)}
		})
		if o.APIKey != "" {
			bo.BearerAuthTokenProvider = bearer.StaticTokenProvider{Token: bearer.Token{Value: o.APIKey}}
			bo.BearerAuthSigner = bearerSigner{}
			bo.AuthSchemePreference = []string{"httpBearerAuth"}
		}
	})
	return &Bedrock{client: client, opts: o}
}

// bearerSigner puts a bearer token on a request, over HTTPS or not: the
// model gateway is on the sandbox channel's address, which is plain HTTP on
// a developer's machine. (The SDK's own signer refuses HTTP.)
type bearerSigner struct{}

func (bearerSigner) SignWithBearerToken(_ context.Context, tok bearer.Token, msg bearer.Message) (bearer.Message, error) {
	req, ok := msg.(*smithyhttp.Request)
	if !ok {
		return nil, fmt.Errorf("bedrock: bearer token for a %T", msg)
	}
	req = req.Clone()
	req.Header.Set("Authorization", "Bearer "+tok.Value)
	return req, nil
}

// retryAfter waits what a Retry-After header asks, else the fallback backoff.
type retryAfter struct {
	fallback retry.BackoffDelayer
}

func (r retryAfter) BackoffDelay(attempt int, err error) (time.Duration, error) {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		if v := re.Response.Header.Get("Retry-After"); v != "" {
			if secs, perr := strconv.Atoi(strings.TrimSpace(v)); perr == nil && secs >= 0 && secs <= 120 {
				return time.Duration(secs) * time.Second, nil
			}
		}
	}
	return r.fallback.BackoffDelay(attempt, err)
}

// Name is "bedrock".
func (b *Bedrock) Name() string { return "bedrock" }

type converseParts struct {
	model    *string
	messages []types.Message
	system   []types.SystemContentBlock
	infer    *types.InferenceConfiguration
	tools    *types.ToolConfiguration
}

func (b *Bedrock) parts(req llm.Request) (converseParts, error) {
	p := converseParts{model: aws.String(b.opts.model("bedrock", req))}
	if n, t := b.opts.maxTokens(req), b.opts.Temperature; n > 0 || t != nil {
		p.infer = &types.InferenceConfiguration{}
		if n > 0 {
			p.infer.MaxTokens = aws.Int32(int32(min(n, math.MaxInt32)))
		}
		if t != nil {
			p.infer.Temperature = aws.Float32(float32(*t))
		}
	}
	if req.System != "" {
		p.system = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: req.System}}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case llm.User:
			p.messages = append(p.messages, types.Message{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: m.Content}}})
		case llm.Assistant:
			var blocks []types.ContentBlock
			if m.Content != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: m.Content})
			}
			for _, tc := range m.ToolCalls {
				var input any
				if err := json.Unmarshal(tc.Args, &input); err != nil {
					input = map[string]any{}
				}
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(tc.ID), Name: aws.String(tc.Name), Input: document.NewLazyDocument(input),
				}})
			}
			p.messages = append(p.messages, types.Message{Role: types.ConversationRoleAssistant, Content: blocks})
		case llm.ToolRole:
			status := types.ToolResultStatusSuccess
			if m.IsError {
				status = types.ToolResultStatusError
			}
			block := &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String(m.ToolCallID), Status: status,
				Content: []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: m.Content}},
			}}
			// Consecutive tool results share one user turn.
			if n := len(p.messages); n > 0 && p.messages[n-1].Role == types.ConversationRoleUser && allToolResults(p.messages[n-1]) {
				p.messages[n-1].Content = append(p.messages[n-1].Content, block)
			} else {
				p.messages = append(p.messages, types.Message{Role: types.ConversationRoleUser, Content: []types.ContentBlock{block}})
			}
		default:
			return p, fmt.Errorf("bedrock: unknown role %q", m.Role)
		}
	}
	if len(req.Tools) > 0 {
		p.tools = &types.ToolConfiguration{}
		for _, t := range req.Tools {
			var schema map[string]any
			if err := json.Unmarshal(t.Schema, &schema); err != nil {
				return p, fmt.Errorf("bedrock: tool %s schema: %w", t.Name, err)
			}
			p.tools.Tools = append(p.tools.Tools, &types.ToolMemberToolSpec{Value: types.ToolSpecification{
				Name: aws.String(t.Name), Description: aws.String(t.Description),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
			}})
		}
	}
	return p, nil
}

func allToolResults(m types.Message) bool {
	for _, c := range m.Content {
		if _, ok := c.(*types.ContentBlockMemberToolResult); !ok {
			return false
		}
	}
	return len(m.Content) > 0
}

// Chat calls Converse.
func (b *Bedrock) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	p, err := b.parts(req)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := b.opts.withTimeout(ctx)
	defer cancel()
	out, err := b.client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: p.model, Messages: p.messages, System: p.system, InferenceConfig: p.infer, ToolConfig: p.tools,
	})
	if err != nil {
		return llm.Response{}, fmt.Errorf("bedrock: %w", err)
	}
	res := llm.Response{StopReason: string(out.StopReason), Model: aws.ToString(p.model)}
	if out.Usage != nil {
		res.Usage = llm.Usage{InputTokens: int(aws.ToInt32(out.Usage.InputTokens)), OutputTokens: int(aws.ToInt32(out.Usage.OutputTokens))}
	}
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return res, nil
	}
	for _, block := range msg.Value.Content {
		switch c := block.(type) {
		case *types.ContentBlockMemberText:
			res.Content += c.Value
		case *types.ContentBlockMemberToolUse:
			args := json.RawMessage(`{}`)
			if c.Value.Input != nil {
				if raw, err := c.Value.Input.MarshalSmithyDocument(); err == nil {
					args = raw
				}
			}
			res.ToolCalls = append(res.ToolCalls, llm.ToolCall{ID: aws.ToString(c.Value.ToolUseId), Name: aws.ToString(c.Value.Name), Args: args})
		}
	}
	return res, nil
}

// Stream calls ConverseStream.
func (b *Bedrock) Stream(ctx context.Context, req llm.Request) (<-chan llm.Event, error) {
	p, err := b.parts(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := b.opts.withTimeout(ctx)
	out, err := b.client.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId: p.model, Messages: p.messages, System: p.system, InferenceConfig: p.infer, ToolConfig: p.tools,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	stream := out.GetStream()
	ch := make(chan llm.Event, 16)
	go func() {
		defer close(ch)
		defer cancel()
		defer func() { _ = stream.Close() }()
		res := llm.Response{Model: aws.ToString(p.model)}
		var tool *llm.ToolCall
		var input strings.Builder
		finishTool := func() {
			if tool != nil {
				tool.Args = json.RawMessage(input.String())
				if !json.Valid(tool.Args) {
					tool.Args = json.RawMessage(`{}`)
				}
				res.ToolCalls = append(res.ToolCalls, *tool)
				tool = nil
				input.Reset()
			}
		}
		for ev := range stream.Events() {
			switch e := ev.(type) {
			case *types.ConverseStreamOutputMemberContentBlockStart:
				if start, ok := e.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
					tool = &llm.ToolCall{ID: aws.ToString(start.Value.ToolUseId), Name: aws.ToString(start.Value.Name)}
				}
			case *types.ConverseStreamOutputMemberContentBlockDelta:
				switch d := e.Value.Delta.(type) {
				case *types.ContentBlockDeltaMemberText:
					res.Content += d.Value
					ch <- llm.Event{Type: llm.TextDelta, Text: d.Value}
				case *types.ContentBlockDeltaMemberToolUse:
					input.WriteString(aws.ToString(d.Value.Input))
				}
			case *types.ConverseStreamOutputMemberContentBlockStop:
				finishTool()
			case *types.ConverseStreamOutputMemberMessageStop:
				res.StopReason = string(e.Value.StopReason)
			case *types.ConverseStreamOutputMemberMetadata:
				if u := e.Value.Usage; u != nil {
					res.Usage = llm.Usage{InputTokens: int(aws.ToInt32(u.InputTokens)), OutputTokens: int(aws.ToInt32(u.OutputTokens))}
				}
			}
		}
		if err := stream.Err(); err != nil {
			ch <- llm.Event{Type: llm.Failed, Err: fmt.Errorf("bedrock stream: %w", err)}
			return
		}
		finishTool()
		for i := range res.ToolCalls {
			ch <- llm.Event{Type: llm.ToolCallDone, ToolCall: &res.ToolCalls[i]}
		}
		ch <- llm.Event{Type: llm.Done, Response: &res}
	}()
	return ch, nil
}
