package modelgateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Provider is one model provider the gateway serves: where its API is, how a
// call carries the platform's credential, and which operations go through.
type Provider struct {
	Name string
	// DefaultUpstream is its public API's base URL; "" for Bedrock, whose
	// endpoint depends on the region.
	DefaultUpstream string
	// Auth says how a call to it is authenticated.
	Auth Auth
	// KeyEnvs are the variables holding its key in a process's environment
	// (the dev server), the first set one winning; none for Bedrock.
	KeyEnvs []string
	// usage reads the usage fields of one JSON document of its answers.
	usage func(doc []byte, u *counts)
	// parse works out the call the path relative to its base URL asks for.
	parse func(segments []string, body []byte) (Call, error)
}

// Auth is how the gateway authenticates a call to a provider.
type Auth struct {
	// Header carries the API key ("" for SigV4), after Prefix.
	Header, Prefix string
	// SigV4 signs the call with the platform's AWS credentials for Service.
	SigV4   bool
	Service string
}

// Call is one model call a sandbox asks for, as the gateway forwards it.
type Call struct {
	Provider Provider
	// Path is the operation's path relative to the provider's base URL,
	// escaped as the provider's SDK escapes it.
	Path string
	// Model is the model the call names ("" when it names none).
	Model string
	// Body is what to send: the sandbox's body, but for OpenAI streams, which
	// are asked to report their usage.
	Body []byte
}

// The providers, by name.
var providers = map[string]Provider{
	sandboxwire.ModelAnthropic: {
		Name: sandboxwire.ModelAnthropic, DefaultUpstream: "https://api.anthropic.com",
		Auth: Auth{Header: "X-Api-Key"}, KeyEnvs: []string{"ANTHROPIC_API_KEY"},
		usage: anthropicUsage, parse: bodyModel(regexp.MustCompile(`^v1/messages$`), false),
	},
	sandboxwire.ModelOpenAI: {
		Name: sandboxwire.ModelOpenAI, DefaultUpstream: "https://api.openai.com/v1",
		Auth: Auth{Header: "Authorization", Prefix: "Bearer "}, KeyEnvs: []string{"OPENAI_API_KEY"},
		usage: openAIUsage, parse: bodyModel(regexp.MustCompile(`^chat/completions$`), true),
	},
	sandboxwire.ModelMistral: {
		Name: sandboxwire.ModelMistral, DefaultUpstream: "https://api.mistral.ai/v1",
		Auth: Auth{Header: "Authorization", Prefix: "Bearer "}, KeyEnvs: []string{"MISTRAL_API_KEY"},
		// Mistral refuses stream_options; it reports a stream's usage unasked.
		usage: openAIUsage, parse: bodyModel(regexp.MustCompile(`^chat/completions$`), false),
	},
	sandboxwire.ModelGemini: {
		Name: sandboxwire.ModelGemini, DefaultUpstream: "https://generativelanguage.googleapis.com",
		Auth: Auth{Header: "X-Goog-Api-Key"}, KeyEnvs: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"},
		usage: geminiUsage, parse: geminiCall,
	},
	sandboxwire.ModelBedrock: {
		Name:  sandboxwire.ModelBedrock,
		Auth:  Auth{SigV4: true, Service: "bedrock"},
		usage: bedrockUsage, parse: bedrockCall,
	},
}

// ProviderNamed returns the provider called name; ok is false for a name the
// gateway does not know.
func ProviderNamed(name string) (Provider, bool) {
	p, ok := providers[name]
	return p, ok
}

// Parse works out the call a request asks for from its path relative to
// the provider's base URL (escaped or not) and its body. An operation the
// gateway does not forward is not_found; a body that names no model where
// the operation needs one, invalid_request.
func (p Provider) Parse(path string, body []byte) (Call, error) {
	var segments []string
	for _, s := range strings.Split(strings.Trim(path, "/"), "/") {
		seg, err := url.PathUnescape(s)
		if err != nil || seg == "" {
			return Call{}, noOperation()
		}
		segments = append(segments, seg)
	}
	c, err := p.parse(segments, body)
	c.Provider = p
	return c, err
}

func noOperation() error {
	return apierror.New(apierror.NotFound, "The gateway forwards only this provider's model calls.")
}

// bodyModel parses an operation matching op whose body is a JSON object
// naming its model, as the chat APIs' are. askUsage asks a streamed call to
// report its usage (OpenAI's stream_options.include_usage), which adds one
// last chunk, without choices, to the stream.
func bodyModel(op *regexp.Regexp, askUsage bool) func([]string, []byte) (Call, error) {
	return func(segments []string, body []byte) (Call, error) {
		path := escapeSegments(segments)
		if !op.MatchString(joined(segments)) {
			return Call{}, noOperation()
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
			return Call{}, apierror.New(apierror.InvalidRequest, "The request body must be a JSON object.")
		}
		var model string
		if err := json.Unmarshal(fields["model"], &model); err != nil || model == "" {
			return Call{}, apierror.New(apierror.InvalidRequest, "The request must name its model.")
		}
		var stream bool
		_ = json.Unmarshal(fields["stream"], &stream)
		if !askUsage || !stream {
			return Call{Path: path, Model: model, Body: body}, nil
		}
		var opts map[string]json.RawMessage
		_ = json.Unmarshal(fields["stream_options"], &opts)
		if bytes.Equal(opts["include_usage"], []byte("true")) {
			return Call{Path: path, Model: model, Body: body}, nil
		}
		if opts == nil {
			opts = map[string]json.RawMessage{}
		}
		opts["include_usage"] = json.RawMessage("true")
		var err error
		if fields["stream_options"], err = json.Marshal(opts); err != nil {
			return Call{}, err
		}
		if body, err = json.Marshal(fields); err != nil {
			return Call{}, err
		}
		return Call{Path: path, Model: model, Body: body}, nil
	}
}

// geminiOp is a Gemini model call: {version}/models/{model}:{method}.
var geminiOp = regexp.MustCompile(`^v1(beta|alpha)?/models/([^/:]+):(generateContent|streamGenerateContent)$`)

func geminiCall(segments []string, body []byte) (Call, error) {
	m := geminiOp.FindStringSubmatch(joined(segments))
	if m == nil {
		return Call{}, noOperation()
	}
	return Call{Path: escapeSegments(segments), Model: m[2], Body: body}, nil
}

// bedrockOps are the Bedrock runtime's model calls, after model/{modelId}/.
var bedrockOps = map[string]bool{"converse": true, "converse-stream": true, "invoke": true, "invoke-with-response-stream": true}

// bedrockCall parses model/{modelId}/{operation}. A model ID may hold a slash
// (an inference profile's ARN), sent escaped or not: everything between the
// first segment and the last is the model ID, escaped again as the SDK does.
func bedrockCall(segments []string, body []byte) (Call, error) {
	n := len(segments)
	if n < 3 || segments[0] != "model" || !bedrockOps[segments[n-1]] {
		return Call{}, noOperation()
	}
	model := strings.Join(segments[1:n-1], "/")
	if model == "." || model == ".." { // a dot segment: the upstream would resolve it to another path
		return Call{}, noOperation()
	}
	return Call{Path: "model/" + escapeStrict(model) + "/" + segments[n-1], Model: model, Body: body}, nil
}

// joined is the path of segments, or "" when one holds a slash (an escaped
// one): no operation but Bedrock's has a segment with a slash.
func joined(segments []string) string {
	for _, s := range segments {
		if strings.Contains(s, "/") {
			return ""
		}
	}
	return strings.Join(segments, "/")
}

// escapeSegments joins segments into a path, each escaped as a path segment.
func escapeSegments(segments []string) string {
	out := make([]string, len(segments))
	for i, s := range segments {
		out[i] = url.PathEscape(s)
	}
	return strings.Join(out, "/")
}

// escapeStrict escapes all but RFC 3986's unreserved characters, as the AWS
// SDKs escape a path label (a Bedrock model ID's ':' and '/' included).
func escapeStrict(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
