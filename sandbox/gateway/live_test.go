package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/sandbox/redact"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

const liveToken = "rsb_live-token-0123456789"

// post is one POST deltas the platform got, and the status it answers with.
type post struct {
	req    sandboxwire.DeltasRequest
	answer chan int
}

// livePlatform is a platform whose deltas route hands each post to the test,
// which answers it (with a status) when it wants; a post the platform
// refuses as invalid fails the test.
func livePlatform(t *testing.T) (*Client, <-chan post, *bytes.Buffer) {
	t.Helper()
	posts := make(chan post)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in sandboxwire.DeltasRequest
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || r.URL.Path != "/sandbox/s1/deltas" || r.Header.Get("Authorization") != "Bearer "+liveToken {
			t.Errorf("request %s %v", r.URL.Path, err)
		}
		if err := in.Validate(); err != nil {
			t.Errorf("invalid post: %v", err)
		}
		p := post{req: in, answer: make(chan int, 1)}
		select {
		case posts <- p:
		case <-r.Context().Done():
			return
		}
		var status int
		select {
		case status = <-p.answer:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	var logs bytes.Buffer
	return New(srv.URL, "s1", liveToken, redact.New("sk-the-secret-0123")), posts, &logs
}

// summary lists a post's events: text@offset/message or started:tool.
func summary(t *testing.T, p post) string {
	t.Helper()
	var s []string
	for _, e := range p.req.Deltas {
		switch e.Type {
		case sandboxwire.TypeAgentMessageDelta:
			var d sandboxwire.MessageDelta
			_ = json.Unmarshal(e.Data, &d)
			s = append(s, fmt.Sprintf("%s@%d/%s", d.Text, d.Offset, d.MessageID))
		case sandboxwire.TypeToolCallStarted:
			var c sandboxwire.ToolCallStarted
			_ = json.Unmarshal(e.Data, &c)
			s = append(s, "started:"+c.ToolCallID+":"+c.Args)
		default:
			t.Errorf("event %s", e.Type)
		}
	}
	return strings.Join(s, " ")
}

func delta(id string, offset int, text string) sandboxwire.MessageDelta {
	return sandboxwire.MessageDelta{MessageID: id, Offset: offset, Text: text}
}

// TestLiveBatchesWhileAPostIsInFlight: the first event goes at once; what
// comes while its post is in flight goes in the next one, the pieces of one
// message merged; the secrets are hidden.
func TestLiveBatchesWhileAPostIsInFlight(t *testing.T) {
	t.Parallel()
	cl, posts, logs := livePlatform(t)
	l := cl.Live(t.Context(), slog.New(slog.NewTextHandler(logs, nil)))
	defer l.Close()
	l.Send(delta("m1", 0, "Hel"))
	first := <-posts
	if got := summary(t, first); got != "Hel@0/m1" {
		t.Errorf("first post %s", got)
	}
	l.Send(delta("m1", 3, "lo "))
	l.Send(delta("m1", 6, "there."))
	l.Send(sandboxwire.ToolCallStarted{ToolCallID: "c1", Tool: "sh", Args: `{"key":"sk-the-secret-0123"}`})
	l.Send(delta("m2", 0, "Done"))
	l.Send(delta("m2", 4, "."))
	l.Send(delta("m3", 7, "not after m2"))
	first.answer <- http.StatusOK
	second := <-posts
	second.answer <- http.StatusOK
	if got, want := summary(t, second), `lo there.@3/m1 started:c1:{"key":"[redacted]"} Done.@0/m2 not after m2@7/m3`; got != want {
		t.Errorf("second post\n%s\nwant\n%s", got, want)
	}
	l.Close()
	select {
	case p := <-posts:
		t.Errorf("a post after Close: %s", summary(t, p))
	default:
	}
}

// TestLiveDropsWhatFails: a failed post is tried once, logged without the
// token and dropped; the next events go on. A missing route or a refused
// token stops the sender.
func TestLiveDropsWhatFails(t *testing.T) {
	t.Parallel()
	cl, posts, logs := livePlatform(t)
	l := cl.Live(t.Context(), slog.New(slog.NewTextHandler(logs, nil)))
	defer l.Close()
	l.Send(delta("m1", 0, "lost"))
	(<-posts).answer <- http.StatusServiceUnavailable
	l.Flush()
	l.Send(delta("m1", 4, " kept"))
	p := <-posts
	p.answer <- http.StatusOK
	if got := summary(t, p); got != " kept@4/m1" {
		t.Errorf("after the failure: %s (a retry?)", got)
	}
	if !strings.Contains(logs.String(), "live events dropped") || strings.Contains(logs.String(), liveToken) {
		t.Errorf("logs %s", logs)
	}
	for _, status := range []int{http.StatusNotFound, http.StatusUnauthorized} {
		l := cl.Live(t.Context(), slog.New(slog.DiscardHandler))
		l.Send(delta("m1", 0, "a"))
		(<-posts).answer <- status
		l.Flush()
		l.Send(delta("m1", 1, "b"))
		l.Close()
		select {
		case p := <-posts:
			t.Errorf("%d: a post after it: %s", status, summary(t, p))
		default:
		}
	}
}

// TestLiveCloseFlushes: Close returns once what was queued is posted; what is
// sent after it is dropped. Flush returns once what was sent is posted.
func TestLiveCloseFlushes(t *testing.T) {
	t.Parallel()
	cl, posts, _ := livePlatform(t)
	var got []string
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case p := <-posts:
				got = append(got, summary(t, p))
				p.answer <- http.StatusOK
			case <-stop:
				return
			}
		}
	}()
	l := cl.Live(t.Context(), slog.New(slog.DiscardHandler))
	l.Send(delta("m1", 0, "a"))
	l.Flush()
	l.Send(delta("m1", 1, "b"))
	l.Send(delta("m1", 2, "c"))
	l.Close()
	l.Send(delta("m1", 3, "d"))
	l.Flush()
	l.Close()
	close(stop) // no post is on its way: Close waited for them
	<-stopped
	if all := strings.Join(got, " "); all != "a@0/m1 bc@1/m1" && all != "a@0/m1 b@1/m1 c@2/m1" {
		t.Errorf("posted %q", got)
	}
}

// TestLiveBounds: a delta or a tool start too long for one event is split or
// cut; more events than a post takes go in several; and when too many wait,
// the oldest are dropped.
func TestLiveBounds(t *testing.T) {
	t.Parallel()
	cl, posts, logs := livePlatform(t)
	l := cl.Live(t.Context(), slog.New(slog.NewTextHandler(logs, nil)))
	defer l.Close()
	long := strings.Repeat("é<", 4*sandboxwire.MaxDeltaBytes/3)
	l.Send(delta("m1", 5, long))
	l.Send(sandboxwire.ToolCallStarted{ToolCallID: "c1", Args: strings.Repeat("<", sandboxwire.MaxEventTextChars)})
	p := <-posts
	p.answer <- http.StatusOK
	var text strings.Builder
	for i, e := range p.req.Deltas {
		if e.Type == sandboxwire.TypeToolCallStarted {
			var c sandboxwire.ToolCallStarted
			_ = json.Unmarshal(e.Data, &c)
			if i != len(p.req.Deltas)-1 || !strings.HasSuffix(c.Args, "…") {
				t.Errorf("tool start %d of %d: %.40q", i, len(p.req.Deltas), c.Args)
			}
			continue
		}
		var d sandboxwire.MessageDelta
		_ = json.Unmarshal(e.Data, &d)
		if d.Offset != 5+utf8.RuneCountInString(text.String()) {
			t.Errorf("delta %d at %d after %d code points", i, d.Offset, utf8.RuneCountInString(text.String()))
		}
		text.WriteString(d.Text)
	}
	if text.String() != long || len(p.req.Deltas) < 4 {
		t.Errorf("%d events; the text split comes back different", len(p.req.Deltas))
	}

	// While one post is in flight, liveQueue+1 tool starts come.
	l.Send(sandboxwire.ToolCallStarted{ToolCallID: "first"})
	inFlight := <-posts
	for i := range liveQueue + 1 {
		l.Send(sandboxwire.ToolCallStarted{ToolCallID: fmt.Sprint(i)})
	}
	inFlight.answer <- http.StatusOK
	var ids []string
	for len(ids) < liveQueue {
		p := <-posts
		p.answer <- http.StatusOK
		for _, e := range p.req.Deltas {
			var c sandboxwire.ToolCallStarted
			_ = json.Unmarshal(e.Data, &c)
			ids = append(ids, c.ToolCallID)
		}
	}
	if len(ids) != liveQueue || ids[0] != "1" || ids[len(ids)-1] != fmt.Sprint(liveQueue) {
		t.Errorf("posted %d tool starts, %s to %s", len(ids), ids[0], ids[len(ids)-1])
	}
	if !strings.Contains(logs.String(), "dropped=1") {
		t.Errorf("logs %s", logs)
	}
}
