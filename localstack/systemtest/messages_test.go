package systemtest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/config"
)

func TestMessagesAreQueuedOncePerClientID(t *testing.T) {
	t.Parallel()
	s := start(t, fakeSandbox(), withConfig(func(c *config.RemoteAgents) {
		c.CreationTimeout = 20 * time.Second
		c.AllowedOrigins = []string{"https://app.example.com"}
	}))
	id, tok, sb, _ := s.readySandbox(t, createBody("Hi"))
	path := "/api/remote_agents/" + id + "/messages"

	first := s.call(http.MethodPost, path, tok, map[string]any{"text": "hello", "client_message_id": "m-1"})
	if first.status != http.StatusOK || first.str("status") != "queued" || first.body["message_id"] == nil {
		t.Fatalf("message: %d %s", first.status, first.raw)
	}
	again := s.call(http.MethodPost, path, tok, map[string]any{"text": "hello", "client_message_id": "m-1"})
	if again.status != http.StatusOK || again.body["message_id"] != first.body["message_id"] || again.headers.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry: %d %s %v", again.status, again.raw, again.headers)
	}
	wantError(t, s.call(http.MethodPost, path, tok, map[string]any{"text": "other", "client_message_id": "m-1"}), 409, "idempotency_key_reused")
	answer := s.call(http.MethodPost, path, tok, map[string]any{"answer": map[string]any{"question_id": "q_1", "option_id": "o2"}, "client_message_id": "m-2"})
	if answer.status != http.StatusOK {
		t.Fatalf("answer: %d %s", answer.status, answer.raw)
	}

	// Attachments: presign, PUT, attach; the sandbox's inbox gets a download URL.
	up := s.call(http.MethodPost, "/api/remote_agents/"+id+"/attachments", tok, map[string]any{"name": "notes.txt", "size_bytes": 5, "content_type": "text/plain"})
	if up.status != http.StatusOK {
		t.Fatalf("attachments: %d %s", up.status, up.raw)
	}
	if h, _ := up.body["upload_headers"].(map[string]any); h["Content-Length"] != "5" || h["Content-Type"] != "text/plain" {
		t.Errorf("upload headers: %s", up.raw)
	}
	// The URL takes the 5 bytes asked for, not 2 MB.
	if status := send(t, up.str("upload_url"), up.body["upload_headers"], []byte(strings.Repeat("x", 2<<20))); status != http.StatusForbidden {
		t.Errorf("2 MB to an upload of 5 bytes: %d, want 403", status)
	}
	put(t, up.str("upload_url"), up.body["upload_headers"], []byte("notes"))
	att := s.call(http.MethodPost, path, tok, map[string]any{"text": "see attached", "client_message_id": "m-3",
		"attachments": []any{map[string]any{"key": up.str("key"), "name": "notes.txt", "size_bytes": 5, "content_type": "text/plain"}}})
	if att.status != http.StatusOK {
		t.Fatalf("message with attachment: %d %s", att.status, att.raw)
	}
	inbox := s.call(http.MethodGet, "/sandbox/"+id+"/inbox", sb, nil)
	msgs, _ := inbox.body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("inbox: %s", inbox.raw)
	}
	if a := msgs[1].(map[string]any)["answer"].(map[string]any); a["option_id"] != "o2" {
		t.Errorf("answer in the inbox: %v", a)
	}
	files := msgs[2].(map[string]any)["attachments"].([]any)
	u := files[0].(map[string]any)["url"].(string)
	res, err := http.Get(u)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("download attachment: %v %v", res, err)
	}
	_ = res.Body.Close()

	// Bad input.
	for _, bad := range []map[string]any{
		{},
		{"text": "   "},
		{"text": strings.Repeat("x", 33*1024)},
		{"text": "x", "client_message_id": "has space"},
		{"answer": map[string]any{"question_id": "q 1", "option_id": "o"}},
		{"text": "x", "attachments": []any{map[string]any{"key": "sessions/someone-else/attachments/a/b", "name": "b", "size_bytes": 1}}},
		{"text": "x", "unknown": true},
		// Exactly one of text, answer and env_values.
		{"text": "a", "answer": map[string]any{"question_id": "q_1", "option_id": "o2"}},
		{"text": "a", "env_values": map[string]any{"A": "v"}},
	} {
		wantError(t, s.call(http.MethodPost, path, tok, bad), 400, "invalid_request")
	}
	// File names that are not plain names are a 400, never a 500 nor a stored
	// name: control characters (C0, DEL, C1) and bidirectional controls.
	attachments := "/api/remote_agents/" + id + "/attachments"
	okKey := up.str("key")
	for _, name := range []string{"a\x00b", "tab\there", "del\x7f.txt", "c1\u0085.txt", "invoice\u202efdp.exe", "x\u2066y", "a/b", `a\b`, "..", ""} {
		wantError(t, s.call(http.MethodPost, attachments, tok, map[string]any{"name": name, "size_bytes": 1, "content_type": "text/plain"}), 400, "invalid_request")
		wantError(t, s.call(http.MethodPost, path, tok, map[string]any{"text": "x",
			"attachments": []any{map[string]any{"key": okKey, "name": name, "size_bytes": 5}}}), 400, "invalid_request")
		badKey := okKey[:strings.LastIndex(okKey, "/")+1] + name
		wantError(t, s.call(http.MethodPost, path, tok, map[string]any{"text": "x",
			"attachments": []any{map[string]any{"key": badKey, "name": "notes.txt", "size_bytes": 5}}}), 400, "invalid_request")
	}
	for _, ct := range []string{"text/plain\r\nX-Injected: 1", "text", "tëxt/plain", strings.Repeat("a", 250) + "/plain"} {
		wantError(t, s.call(http.MethodPost, attachments, tok, map[string]any{"name": "a.txt", "size_bytes": 1, "content_type": ct}), 400, "invalid_request")
	}
	for _, size := range []int{0, -1, 25<<20 + 1} {
		wantError(t, s.call(http.MethodPost, attachments, tok, map[string]any{"name": "a.txt", "size_bytes": size}), 400, "invalid_request")
	}
	if ok := s.call(http.MethodPost, attachments, tok, map[string]any{"name": "résumé (1) 🙂.pdf", "size_bytes": 1}); ok.status != http.StatusOK ||
		ok.body["upload_headers"].(map[string]any)["Content-Type"] != "application/octet-stream" {
		t.Errorf("a plain name with no type: %d %s", ok.status, ok.raw)
	}

	wantError(t, s.call(http.MethodPost, path, "", map[string]any{"text": "x"}), 401, "missing_token")
	wantError(t, s.call(http.MethodPost, path, "rak_wrong", map[string]any{"text": "x"}), 401, "invalid_token")
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/00000000-0000-4000-8000-000000000000/messages", tok, map[string]any{"text": "x"}), 404, "agent_not_found")

	// CORS follows remote_agents.allowed_origins, on the messages and events routes.
	for _, route := range []string{path, "/api/remote_agents/" + id + "/events"} {
		pre := s.call(http.MethodOptions, route, "", nil, "Origin", "https://app.example.com", "Access-Control-Request-Method", "POST")
		if pre.headers.Get("Access-Control-Allow-Origin") != "https://app.example.com" || !strings.Contains(pre.headers.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Errorf("preflight of %s from an allowed origin: %d %v", route, pre.status, pre.headers)
		}
		other := s.call(http.MethodOptions, route, "", nil, "Origin", "https://evil.example.com", "Access-Control-Request-Method", "POST")
		if other.headers.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s from another origin allowed: %v", route, other.headers)
		}
	}

	// An ended agent takes no messages.
	s.shutdown(id, tok)
	wantError(t, s.call(http.MethodPost, path, tok, map[string]any{"text": "late", "client_message_id": "m-9"}), 409, "agent_not_alive")
}
