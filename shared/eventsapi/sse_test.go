package eventsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/eventview"
	"github.com/remote-agents/remote-agents/shared/markdown"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/sanitize"
	"github.com/remote-agents/remote-agents/shared/session"
)

// sseEvent is one event as a browser dispatches it.
type sseEvent struct {
	Type, Data, LastEventID string
}

var lineEnd = regexp.MustCompile("\r\n|\r|\n")

// interpret reads a whole event stream as the HTML standard's event stream
// interpretation does: what a browser (and the embed view) makes of what the
// handler writes. An unterminated last line is dropped, as is an unfinished
// event.
func interpret(stream string) (events []sseEvent, lastEventID string, retry string) {
	stream = strings.TrimPrefix(stream, "\ufeff")
	lines := lineEnd.Split(stream, -1)
	lines = lines[:len(lines)-1]
	var data, typ, id strings.Builder
	for _, line := range lines {
		if line == "" {
			lastEventID = id.String()
			if data.Len() > 0 {
				if typ.Len() == 0 {
					typ.WriteString("message")
				}
				events = append(events, sseEvent{typ.String(), strings.TrimSuffix(data.String(), "\n"), lastEventID})
			}
			data.Reset()
			typ.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ.Reset()
			typ.WriteString(value)
		case "data":
			data.WriteString(value + "\n")
		case "id":
			if !strings.ContainsRune(value, 0) {
				id.Reset()
				id.WriteString(value)
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				retry = value
			}
		}
	}
	return events, lastEventID, retry
}

// store is the events of one ended session.
type store struct {
	session.Store // only Events and Get are called
	events        []session.Event
}

func (s *store) Events(_ context.Context, _ string, after int64, limit int) ([]session.Event, error) {
	var out []session.Event
	for _, e := range s.events {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *store) Get(context.Context, string) (session.Session, error) {
	return session.Session{State: session.Ended}, nil
}

// texts a browser must get back exactly: line breaks of every kind, things that
// look like fields, NUL, a BOM, characters of several bytes.
var texts = []string{
	"plain",
	"two\nlines",
	"crlf\r\nand cr\ralone",
	"\n\ndata: forged\n\nid: 99\nevent: end\nretry: 1\n\n",
	": not a comment",
	"nul \x00 and bom \ufeff, line and paragraph separators \u2028 \u2029, next line \u0085",
	"naïve ✓ 日本 😀",
	"",
}

// What the handler writes is read back as written: one event per stored event,
// its id the sequence number, its type, its data the JSON of the Message (what
// Public shows of the event, text as stored), the
// stream's retry, and the end event.
func TestStreamReadsBackAsWritten(t *testing.T) {
	s := &store{}
	var want []sseEvent
	for i, text := range texts {
		e := session.Event{Seq: int64(i + 1), Type: sandboxwire.TypeAgentMessage, At: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Data: map[string]any{"text": text}}
		s.events = append(s.events, e)
		raw, err := json.Marshal(eventview.Message{Seq: e.Seq, Type: e.Type, At: "2025-01-02T03:04:05Z", Data: eventview.Public(e)})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, sseEvent{e.Type, string(raw), strconv.FormatInt(e.Seq, 10)})
	}
	want = append(want, sseEvent{"end", "{}", "8"})
	h := &Handlers{Follower: Follower{Store: s, Log: slog.New(slog.DiscardHandler), ActivePoll: time.Millisecond}}
	var out bytes.Buffer
	over, err := h.Follow(t.Context(), "s", 0, &out, func() {})
	if err != nil || !over {
		t.Fatalf("follow: over %v, %v", over, err)
	}
	if err := End(&out, func() {}, struct{}{}); err != nil {
		t.Fatal(err)
	}
	got, lastID, retry := interpret(out.String())
	if !slices.Equal(got, want) || lastID != "8" || retry != "1000" {
		t.Fatalf("read back %+v, last id %q, retry %q\nwant %+v\nstream %q", got, lastID, retry, want, out.String())
	}
	for i, e := range got[:len(texts)] {
		var m eventview.Message
		if err := json.Unmarshal([]byte(e.Data), &m); err != nil || m.Data["text"] != texts[i] {
			t.Errorf("event %d: text %q (%v), want %q", i+1, m.Data["text"], err, texts[i])
		}
	}
}

// Any text and any valid event type come back as one event whose data is
// exactly the JSON written.
func FuzzWriteReadsBackAsWritten(f *testing.F) {
	for _, text := range texts {
		f.Add(sandboxwire.TypeAgentMessage, text)
	}
	f.Fuzz(func(t *testing.T, typ, text string) {
		if !sandboxwire.ValidEventType(typ) {
			return // the channel accepts no such type: nothing to check
		}
		e := session.Event{Seq: 42, Type: typ, At: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Data: map[string]any{"text": text, text: typ}}
		var out bytes.Buffer
		if err := write(&out, e, eventview.Public); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(eventview.Message{Seq: e.Seq, Type: e.Type, At: "2025-01-02T03:04:05Z", Data: eventview.Public(e)})
		got, lastID, _ := interpret(out.String())
		if want := []sseEvent{{typ, string(raw), "42"}}; !slices.Equal(got, want) || lastID != "42" {
			t.Errorf("read back %+v, want %+v\nstream %q", got, want, out.String())
		}
	})
}

// Any event of any known type, with any data and sequence number, is read
// back by a browser as exactly one event: its type, its sequence number as
// the last event id, and as data one line, the JSON of the Message, whose
// data is what Public shows. What Public shows holds none of the internal
// fields (html other than the platform's, object keys, env references, a
// workspace tool's arguments) and shows errors sanitised.
func FuzzWriteAnyEvent(f *testing.F) {
	f.Add(uint8(0), int64(1), `{"text":"**hi**\n\ndata: x","html":"<script>"}`)
	f.Add(uint8(1), int64(2), `{"text":"failed at /home/u/.aws/credentials: AKIAABCDEFGHIJKLMNOP"}`)
	f.Add(uint8(3), int64(3), `{"name":"bash","is_error":true,"output":"\u001b[31mboom\r\nid: 9"}`)
	f.Add(uint8(7), int64(4), `{"text":"t","attachments":[{"name":"a","key":"sessions/s/attachments/x/a","size_bytes":1},7]}`)
	f.Add(uint8(8), int64(5), `{"keys":["A"],"ref":"sessions/s/env/x.json"}`)
	f.Add(uint8(9), int64(6), `{"prefix":"p/","files":[{"path":"a.png","size_bytes":1,"key":"k"}]}`)
	f.Add(uint8(10), int64(7), `{"snapshot_key":"k","message":"m"}`)
	f.Add(uint8(17), int64(1<<62), `{"args":"{}","request_id":"r"}`)
	f.Fuzz(func(t *testing.T, which uint8, seq int64, data string) {
		typ := sandboxwire.Types[int(which)%len(sandboxwire.Types)]
		if seq < 0 {
			seq = -(seq + 1)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			d = map[string]any{"text": data}
		}
		e := session.Event{Seq: seq, Type: typ, At: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Data: d}
		var out bytes.Buffer
		if err := write(&out, e, eventview.Public); err != nil {
			t.Fatal(err)
		}
		got, lastID, _ := interpret(out.String())
		id := strconv.FormatInt(seq, 10)
		if len(got) != 1 || got[0].Type != typ || got[0].LastEventID != id || lastID != id || strings.ContainsAny(got[0].Data, "\r\n") {
			t.Fatalf("read back %+v, last id %q\nstream %q", got, lastID, out.String())
		}
		var m eventview.Message
		dec := json.NewDecoder(strings.NewReader(got[0].Data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil || m.Seq != seq || m.Type != typ || m.At != "2025-01-02T03:04:05.000000006Z" {
			t.Fatalf("data %s: %+v, %v", got[0].Data, m, err)
		}
		raw, _ := json.Marshal(eventview.Public(e))
		var want map[string]any
		_ = json.Unmarshal(raw, &want)
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(m.Data, want) {
			t.Fatalf("data %+v, want what Public shows: %+v", m.Data, want)
		}
		html, hasHTML := m.Data["html"]
		text, _ := d["text"].(string)
		if typ == sandboxwire.TypeAgentMessage && text != "" {
			if html != viaJSON(markdown.HTML(text)) {
				t.Fatalf("html %q of %q", html, text)
			}
		} else if hasHTML {
			t.Fatalf("%s shows html %q", typ, html)
		}
		hidden := map[string][]string{
			sandboxwire.TypeEnvSubmitted:         {"ref"},
			sandboxwire.TypeWorkspaceToolRequest: {"args"},
			sandboxwire.TypeOutputVerification:   {"prefix"},
			sandboxwire.TypeOutputSnapshot:       {"snapshot_key"},
		}
		for _, k := range hidden[typ] {
			if _, ok := m.Data[k]; ok {
				t.Fatalf("%s shows %s", typ, k)
			}
		}
		for _, k := range []string{"files", "attachments"} {
			list, _ := m.Data[k].([]any)
			for _, item := range list {
				if f, ok := item.(map[string]any); ok && f["key"] != nil && (typ == sandboxwire.TypeOutputVerification || typ == sandboxwire.TypeUserMessage) {
					t.Fatalf("%s shows the key of %s %+v", typ, k, f)
				}
			}
		}
		if typ == sandboxwire.TypeAgentError && text != "" && m.Data["text"] != viaJSON(sanitize.Error(text)) {
			t.Fatalf("error %q shown as %q", text, m.Data["text"])
		}
	})
}

// viaJSON is s as JSON carries it (invalid UTF-8 replaced).
func viaJSON(s string) string {
	raw, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(raw, &out)
	return out
}
