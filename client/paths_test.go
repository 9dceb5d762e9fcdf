package client

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// Every request the client sends is to a route of the route table, by its
// method and path; the path's parameters are escaped segments.
func TestRequestsAreRoutesOfTheTable(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upload" { // the object store's, not the API's
			return
		}
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/events"):
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: end\ndata: {}\n\n"))
		case strings.HasSuffix(r.URL.Path, "/attachments"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"key":"k","upload_url":"http://` + r.Host + `/upload","upload_headers":{},"expires_in_seconds":60}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	ctx := t.Context()
	const id, tok = "a/b c", "t"
	steps := []func() error{
		func() error { _, err := c.Create(ctx, hello()); return err },
		func() error { _, err := c.Alive(ctx, id, tok); return err },
		func() error { _, err := c.Shutdown(ctx, id, tok); return err },
		func() error { _, err := c.SendMessage(ctx, id, tok, Message{Text: "hi"}); return err },
		func() error {
			_, err := c.Attach(ctx, id, tok, "f", "text/plain", 1, strings.NewReader("x"))
			return err
		},
		func() error { _, err := c.SubmitEnv(ctx, id, tok, EnvSubmission{}); return err },
		func() error { _, err := c.RunTool(ctx, id, tok, "read/x", map[string]any{}); return err },
		func() error { _, err := c.List(ctx, ListOptions{Limit: 1}); return err },
		func() error { _, err := c.Kill(ctx, id); return err },
		func() error {
			for _, err := range c.Events(ctx, id, tok) {
				return err
			}
			return nil
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if len(sent) != len(steps) {
		t.Errorf("%d requests for %d calls: %q", len(sent), len(steps), sent)
	}
	for _, req := range sent {
		if route(req) == "" {
			t.Errorf("%s is no route of the table", req)
		}
	}
}

// route returns the key of the table's route req ("METHOD /escaped/path")
// is a request of, or "".
func route(req string) string {
	method, path, _ := strings.Cut(req, " ")
	segs := strings.Split(path, "/")
	for _, r := range routes.All() {
		pattern := strings.Split(r.Path, "/")
		if r.Method != method || len(pattern) != len(segs) {
			continue
		}
		ok := true
		for i, p := range pattern {
			param := strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}")
			if (param && (segs[i] == "" || strings.Contains(segs[i], "/"))) || (!param && p != segs[i]) {
				ok = false
				break
			}
		}
		if ok {
			return r.Key()
		}
	}
	return ""
}
