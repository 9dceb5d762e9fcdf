package modelgateway_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Provider.Parse, the model route's request decoder, for any provider, path
// and body: a refusal is not_found (no such operation) or invalid_request; a
// call names a model and the provider, its path has no dot segments (the
// upstream would resolve them to another operation), and the call parses
// again from its own path and body as itself: what is forwarded is what was
// checked. A body the gateway changes (an OpenAI stream asked to report its
// usage) is the same JSON object but for stream_options.include_usage.
func FuzzParse(f *testing.F) {
	f.Add(uint8(0), "v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5}`)
	f.Add(uint8(1), "/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"foo":1}}`)
	f.Add(uint8(1), "chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`)
	f.Add(uint8(2), "v1beta/models/gemini-2.5-pro:streamGenerateContent", `{}`)
	f.Add(uint8(3), "chat/completions", `{"model":"mistral-large","stream":true}`)
	f.Add(uint8(4), "model/arn:aws:bedrock:us-east-1:123:inference-profile%2Fus.anthropic.claude/converse-stream", `{}`)
	f.Add(uint8(4), "model/anthropic.claude-3/invoke", `{}`)
	f.Add(uint8(4), "model/../converse", `{}`)
	f.Add(uint8(0), "v1/../v1/messages", `{"model":"m"}`)
	f.Add(uint8(1), "chat%2Fcompletions", `{"model":"m"}`)
	f.Fuzz(func(t *testing.T, which uint8, path, body string) {
		name := sandboxwire.ModelProviders[int(which)%len(sandboxwire.ModelProviders)]
		p, ok := modelgateway.ProviderNamed(name)
		if !ok {
			t.Fatalf("no provider %s", name)
		}
		call, err := p.Parse(path, []byte(body))
		if err != nil {
			if c := apierror.CodeOf(err); c != apierror.NotFound && c != apierror.InvalidRequest {
				t.Fatalf("%s %q: error %v", name, path, err)
			}
			return
		}
		if call.Provider.Name != name || call.Model == "" || call.Path == "" {
			t.Fatalf("%s %q: call %+v", name, path, call)
		}
		for _, seg := range strings.Split(call.Path, "/") {
			un, err := url.PathUnescape(seg)
			if err != nil || seg == "" || un == "." || un == ".." {
				t.Fatalf("%s %q: forwarded as %q", name, path, call.Path)
			}
		}
		again, err := p.Parse(call.Path, call.Body)
		if err != nil || again.Path != call.Path || again.Model != call.Model || !bytes.Equal(again.Body, call.Body) {
			t.Fatalf("%s %q: call %+v parses again as %+v, %v", name, path, call, again, err)
		}
		if !bytes.Equal(call.Body, []byte(body)) {
			var in, out map[string]any
			if json.Unmarshal([]byte(body), &in) != nil || json.Unmarshal(call.Body, &out) != nil {
				t.Fatalf("%s: body %q became %q", name, body, call.Body)
			}
			opts, _ := out["stream_options"].(map[string]any)
			if opts["include_usage"] != true {
				t.Fatalf("%s: body %q became %q", name, body, call.Body)
			}
			if inOpts, ok := in["stream_options"].(map[string]any); ok {
				inOpts["include_usage"] = true
			} else {
				in["stream_options"] = map[string]any{"include_usage": true}
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("%s: body %q became %q", name, body, call.Body)
			}
		}
	})
}
