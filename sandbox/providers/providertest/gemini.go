package providertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// geminiSignature is the thought signature the server attaches to its function
// call (base64 in JSON), which must come back with the call.
const geminiSignature = "c2lnbmF0dXJl"

// Gemini answers like the Gemini API's POST
// /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse,
// for model gemini-2.5-pro and key "gemini-key". Its 429 says when to retry
// the way the API does, in a RetryInfo detail.
func Gemini(t testing.TB) WireFormat {
	return WireFormat{handle: geminiHandler(t), settings: func(body map[string]any) (any, any) {
		return Field(body, "generationConfig", "temperature"), Field(body, "generationConfig", "maxOutputTokens")
	}}
}

// GeminiError writes the Gemini API's error body.
func GeminiError(w http.ResponseWriter, status int, name, details string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"try later","status":%q,"details":[%s]}}`, status, name, details)
}

func geminiHandler(t testing.TB) handler {
	return func(w http.ResponseWriter, r *http.Request, scenario string, n int, body map[string]any, _ bool) {
		const base = "/v1beta/models/gemini-2.5-pro"
		stream := r.URL.Path == base+":streamGenerateContent" && r.URL.Query().Get("alt") == "sse"
		if !stream && r.URL.Path != base+":generateContent" || r.Header.Get("X-Goog-Api-Key") != "gemini-key" {
			t.Errorf("request %s %s key %q", r.Method, r.URL, r.Header.Get("X-Goog-Api-Key"))
		}
		if Field(body, "systemInstruction", "parts") == nil {
			t.Errorf("systemInstruction %v", body["systemInstruction"])
		}
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 || Field(tools[0].(map[string]any), "functionDeclarations").([]any)[0].(map[string]any)["name"] != "read" {
			t.Errorf("tools %v", body["tools"])
		}
		contents, _ := body["contents"].([]any)
		if first, _ := contents[0].(map[string]any); first["role"] != "user" {
			t.Errorf("contents %v", contents)
		}
		// A text reply, with a thought the answer leaves out (thinking is billed
		// as output: 3 + 1 tokens).
		parts := []string{`{"text":"Hello ","thought":true}`, `{"text":"Hello there."}`}
		usage := `{"promptTokenCount":12,"candidatesTokenCount":3,"thoughtsTokenCount":1,"totalTokenCount":16}`
		switch {
		case scenario == scenario429 && n == 1:
			GeminiError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}`)
			return
		case scenario == scenario500 && n == 1:
			GeminiError(w, http.StatusInternalServerError, "INTERNAL", "")
			return
		case scenario == scenarioTool:
			parts = []string{`{"text":"Let me look."}`, `{"functionCall":{"id":"call_1","name":"read","args":{"path":"README.md"}},"thoughtSignature":"` + geminiSignature + `"}`}
			usage = `{"promptTokenCount":12,"candidatesTokenCount":9,"totalTokenCount":21}`
		case scenario == scenarioToolBack:
			last, _ := contents[len(contents)-1].(map[string]any)
			prev, _ := contents[len(contents)-2].(map[string]any)
			response, _ := Field(last, "parts").([]any)[0].(map[string]any)["functionResponse"].(map[string]any)
			prevParts, _ := prev["parts"].([]any)
			call, _ := prevParts[len(prevParts)-1].(map[string]any)
			if last["role"] != "user" || response["id"] != "call_1" || response["name"] != "read" || Field(response, "response", "output") != "# Demo" {
				t.Errorf("tool result not sent back: %v", last)
			}
			if prev["role"] != "model" || Field(call, "functionCall", "name") != "read" || call["thoughtSignature"] != geminiSignature {
				t.Errorf("the call (with its thought signature) not sent back: %v", prev)
			}
			parts = []string{`{"text":"The file is titled Demo."}`}
			usage = `{"promptTokenCount":20,"candidatesTokenCount":6,"totalTokenCount":26}`
		}
		response := func(parts []string, finish, usage string) string {
			s := `{"candidates":[{"content":{"role":"model","parts":[` + strings.Join(parts, ",") + `]},"index":0`
			if finish != "" {
				s += `,"finishReason":"` + finish + `"`
			}
			s += `}]`
			if usage != "" {
				s += `,"usageMetadata":` + usage
			}
			return s + `,"modelVersion":"gemini-2.5-pro","responseId":"r1"}`
		}
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			chunks := []string{
				response([]string{`{"text":"Hello "}`}, "", `{"promptTokenCount":12,"totalTokenCount":12}`),
				response([]string{`{"text":"there."}`}, "STOP", usage),
			}
			if scenario == scenarioTool {
				chunks = []string{response(parts, "STOP", usage)}
			}
			for _, c := range chunks {
				fmt.Fprintf(w, "data: %s\r\n\r\n", c)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, response(parts, "STOP", usage))
	}
}
