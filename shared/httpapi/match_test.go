package httpapi_test

import (
	"maps"
	"testing"

	"github.com/remote-agents/remote-agents/shared/httpapi"
)

func TestMatchPath(t *testing.T) {
	const model = "/sandbox/{sessionId}/model/{provider}/{proxy+}"
	tests := []struct {
		name, pattern, path string
		want                map[string]string // nil: no match
	}{
		{"plain", "/api/{id}/events", "/api/a1/events", map[string]string{"id": "a1"}},
		{"trailing slash", "/api/{id}/events", "/api/a1/events/", map[string]string{"id": "a1"}},
		{"too long", "/api/{id}/events", "/api/a1/events/more", nil},
		{"empty parameter", "/api/{id}/events", "/api//events", nil},
		{"other literal", "/api/{id}/events", "/api/a1/alive", nil},
		{"greedy, one segment", model, "/sandbox/s1/model/openai/chat", map[string]string{"sessionId": "s1", "provider": "openai", "proxy": "chat"}},
		{"greedy, several segments", model, "/sandbox/s1/model/anthropic/v1/messages", map[string]string{"sessionId": "s1", "provider": "anthropic", "proxy": "v1/messages"}},
		{"greedy keeps colons", model, "/sandbox/s1/model/bedrock/model/us.anthropic.claude-v1:0/converse",
			map[string]string{"sessionId": "s1", "provider": "bedrock", "proxy": "model/us.anthropic.claude-v1:0/converse"}},
		{"greedy needs a segment", model, "/sandbox/s1/model/openai", nil},
		{"greedy needs a segment, slash", model, "/sandbox/s1/model/openai/", nil},
		{"greedy refuses an empty segment", model, "/sandbox/s1/model/openai/v1//x", nil},
		{"greedy after a mismatch", model, "/sandbox/s1/spec/openai/v1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := httpapi.MatchPath(tt.pattern, tt.path)
			if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
				t.Errorf("MatchPath(%q, %q) = %v, %v; want %v", tt.pattern, tt.path, got, ok, tt.want)
			}
		})
	}
}

func FuzzMatchPath(f *testing.F) {
	f.Add("/sandbox/s1/model/anthropic/v1/messages")
	f.Add("/sandbox//model/x/")
	f.Fuzz(func(t *testing.T, path string) {
		params, ok := httpapi.MatchPath("/sandbox/{sessionId}/model/{provider}/{proxy+}", path)
		if ok && (params["sessionId"] == "" || params["provider"] == "" || params["proxy"] == "") {
			t.Errorf("%q matched with an empty parameter: %v", path, params)
		}
	})
}
