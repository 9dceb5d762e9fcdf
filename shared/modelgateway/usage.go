package modelgateway

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/remote-agents/remote-agents/shared/session"
)

// counts are the usage fields an answer has reported so far. Providers
// report running totals (Anthropic's message_start then message_delta,
// Gemini's every chunk), so the last value of each field wins.
type counts struct {
	input, output, cached, cacheWrite, thoughts *int64
}

func set(dst **int64, v *int64) {
	if v != nil {
		*dst = v
	}
}

func (c counts) seen() bool {
	return c.input != nil || c.output != nil || c.cached != nil || c.cacheWrite != nil || c.thoughts != nil
}

func val(p *int64) int64 {
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

// anthropicTokens are the usage fields of Anthropic's Messages API.
type anthropicTokens struct {
	Input      *int64 `json:"input_tokens"`
	Output     *int64 `json:"output_tokens"`
	CacheWrite *int64 `json:"cache_creation_input_tokens"`
	CacheRead  *int64 `json:"cache_read_input_tokens"`
}

// anthropicUsage reads a message's usage, a stream's message_start
// (message.usage) and message_delta (usage). Anthropic's input_tokens leave
// out the cached and cache-writing tokens: usage adds them back.
func anthropicUsage(doc []byte, c *counts) {
	var d struct {
		Usage   *anthropicTokens `json:"usage"`
		Message struct {
			Usage *anthropicTokens `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return
	}
	for _, u := range []*anthropicTokens{d.Message.Usage, d.Usage} {
		if u != nil {
			set(&c.input, u.Input)
			set(&c.output, u.Output)
			set(&c.cacheWrite, u.CacheWrite)
			set(&c.cached, u.CacheRead)
		}
	}
}

// openAIUsage reads the chat completions API's usage (OpenAI's and Mistral's):
// a completion's, and a stream's last chunk's (null in the others).
func openAIUsage(doc []byte, c *counts) {
	var d struct {
		Usage *struct {
			Prompt     *int64 `json:"prompt_tokens"`
			Completion *int64 `json:"completion_tokens"`
			Details    *struct {
				Cached *int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Usage == nil {
		return
	}
	set(&c.input, d.Usage.Prompt)
	set(&c.output, d.Usage.Completion)
	if d.Usage.Details != nil {
		set(&c.cached, d.Usage.Details.Cached)
	}
}

// geminiUsage reads the Gemini API's usageMetadata: every streamed chunk
// carries the totals so far. Thinking is billed as output.
func geminiUsage(doc []byte, c *counts) {
	var d struct {
		Usage *struct {
			Prompt     *int64 `json:"promptTokenCount"`
			ToolPrompt *int64 `json:"toolUsePromptTokenCount"`
			Candidates *int64 `json:"candidatesTokenCount"`
			Thoughts   *int64 `json:"thoughtsTokenCount"`
			Cached     *int64 `json:"cachedContentTokenCount"`
		} `json:"usageMetadata"`
	}
	if json.Unmarshal(doc, &d) != nil || d.Usage == nil {
		return
	}
	u := d.Usage
	if u.Prompt != nil || u.ToolPrompt != nil {
		in := val(u.Prompt) + val(u.ToolPrompt)
		c.input = &in
	}
	set(&c.output, u.Candidates)
	set(&c.thoughts, u.Thoughts)
	set(&c.cached, u.Cached)
}

// bedrockUsage reads Bedrock's Converse usage (an answer's, a stream's
// metadata event's), and an InvokeModelWithResponseStream chunk's invocation
// metrics ({"bytes": base64 of the model's own event}). Bedrock's inputTokens
// leave out the cached and cache-writing tokens: usage adds them back.
func bedrockUsage(doc []byte, c *counts) {
	var d struct {
		Usage *struct {
			Input      *int64 `json:"inputTokens"`
			Output     *int64 `json:"outputTokens"`
			CacheRead  *int64 `json:"cacheReadInputTokens"`
			CacheWrite *int64 `json:"cacheWriteInputTokens"`
		} `json:"usage"`
		Bytes   string `json:"bytes"`
		Metrics *struct {
			Input      *int64 `json:"inputTokenCount"`
			Output     *int64 `json:"outputTokenCount"`
			CacheRead  *int64 `json:"cacheReadInputTokenCount"`
			CacheWrite *int64 `json:"cacheWriteInputTokenCount"`
		} `json:"amazon-bedrock-invocationMetrics"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return
	}
	if u := d.Usage; u != nil {
		set(&c.input, u.Input)
		set(&c.output, u.Output)
		set(&c.cached, u.CacheRead)
		set(&c.cacheWrite, u.CacheWrite)
	}
	if m := d.Metrics; m != nil {
		set(&c.input, m.Input)
		set(&c.output, m.Output)
		set(&c.cached, m.CacheRead)
		set(&c.cacheWrite, m.CacheWrite)
	}
	if d.Bytes != "" {
		if inner, err := base64.StdEncoding.DecodeString(d.Bytes); err == nil {
			bedrockUsage(inner, c)
		}
	}
}

// bedrockHeaders reads InvokeModel's usage, which Bedrock sends as headers.
func bedrockHeaders(header func(string) string, c *counts) {
	num := func(name string) *int64 {
		n, err := strconv.ParseInt(header(name), 10, 64)
		if err != nil {
			return nil
		}
		return &n
	}
	set(&c.input, num("X-Amzn-Bedrock-Input-Token-Count"))
	set(&c.output, num("X-Amzn-Bedrock-Output-Token-Count"))
	set(&c.cached, num("X-Amzn-Bedrock-Cache-Read-Input-Token-Count"))
	set(&c.cacheWrite, num("X-Amzn-Bedrock-Cache-Write-Input-Token-Count"))
}

// usageOf is the session usage of one call that reported c. For the
// providers whose input count leaves the cache out (Anthropic, Bedrock), the
// cached and cache-writing tokens are added back: InputTokens are always all
// the prompt's tokens.
func usageOf(provider string, c counts) session.Usage {
	u := session.Usage{InputTokens: val(c.input), OutputTokens: val(c.output) + val(c.thoughts), CachedTokens: val(c.cached), Calls: 1}
	switch provider {
	case "anthropic", "bedrock":
		u.InputTokens += val(c.cached) + val(c.cacheWrite)
	}
	return u
}
