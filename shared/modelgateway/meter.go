package modelgateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"

	"github.com/remote-agents/remote-agents/shared/session"
)

// Bounds of what a Meter holds while it reads an answer: a whole JSON answer,
// one line or event of a stream, one AWS event stream message. Past them it
// skips what it cannot hold (the answer still goes to the sandbox whole).
const (
	MaxMeteredJSON  = 8 << 20
	maxSSELine      = 1 << 20
	maxStreamFrame  = 16<<20 + 128<<10 + 16 // an event stream message: 16 MB payload, 128 KB headers, prelude and CRC
	usageMarker     = "sage"                // in "usage" and "usageMetadata": events without it are not parsed
	eventStreamType = "application/vnd.amazon.eventstream"
)

// Meter reads a provider's answer as it passes to the sandbox (it is an
// io.Writer that never fails) and finds the usage the provider reported in
// it: in a JSON answer, the Server-Sent Events of a stream, or the messages
// of an AWS event stream (Bedrock), and in Bedrock's InvokeModel headers.
type Meter struct {
	provider Provider
	mode     int
	c        counts
	buf      []byte
	// skipping drops the rest of a line (SSE) or answer (JSON) past its bound.
	skipping bool
	// data gathers an SSE event's data lines.
	data []byte
	// broken stops reading an event stream whose framing makes no sense.
	broken bool
}

const (
	modeJSON = iota
	modeSSE
	modeEventStream
)

// NewMeter returns a meter of one answer of p, with its Content-Type and its
// headers (header returns one by name, "" if absent).
func NewMeter(p Provider, contentType string, header func(string) string) *Meter {
	m := &Meter{provider: p}
	switch mt, _, _ := strings.Cut(strings.ToLower(contentType), ";"); strings.TrimSpace(mt) {
	case "text/event-stream":
		m.mode = modeSSE
	case eventStreamType:
		m.mode = modeEventStream
	}
	if p.Auth.SigV4 && header != nil {
		bedrockHeaders(header, &m.c)
	}
	return m
}

// Write reads p; it never fails.
func (m *Meter) Write(p []byte) (int, error) {
	switch m.mode {
	case modeSSE:
		m.sse(p)
	case modeEventStream:
		m.eventStream(p)
	default:
		if !m.skipping {
			if len(m.buf)+len(p) > MaxMeteredJSON {
				m.skipping, m.buf = true, nil
			} else {
				m.buf = append(m.buf, p...)
			}
		}
	}
	return len(p), nil
}

// Usage is the usage of the call as the answer read so far reported it, with
// Calls 1; ok is false when it reported none.
func (m *Meter) Usage() (u session.Usage, ok bool) {
	c := m.c
	switch m.mode {
	case modeJSON:
		if !m.skipping {
			m.json(m.buf, &c)
		}
	case modeSSE:
		// An answer that ends without a blank line still ends its event.
		if len(m.buf) > 0 && !m.skipping {
			m.line(m.buf, &c)
		}
		m.event(m.data, &c)
	}
	return usageOf(m.provider.Name, c), c.seen()
}

// json reads a whole JSON answer: an object, or an array of them (Gemini's
// stream without alt=sse).
func (m *Meter) json(doc []byte, c *counts) {
	doc = bytes.TrimSpace(doc)
	if len(doc) > 0 && doc[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(doc, &items) == nil {
			for _, item := range items {
				m.provider.usage(item, c)
			}
		}
		return
	}
	m.provider.usage(doc, c)
}

// sse splits p into lines; a blank line ends an event.
func (m *Meter) sse(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !m.skipping {
				if len(m.buf)+len(p) > maxSSELine {
					m.skipping, m.buf = true, m.buf[:0]
				} else {
					m.buf = append(m.buf, p...)
				}
			}
			return
		}
		if !m.skipping {
			if len(m.buf)+i > maxSSELine {
				m.skipping = true
			} else {
				m.buf = append(m.buf, p[:i]...)
				m.line(m.buf, &m.c)
			}
		}
		m.buf, m.skipping, p = m.buf[:0], false, p[i+1:]
	}
}

// line takes one SSE line: data lines gather, a blank line ends the event.
func (m *Meter) line(l []byte, c *counts) {
	l = bytes.TrimSuffix(l, []byte("\r"))
	if len(l) == 0 {
		m.event(m.data, c)
		m.data = m.data[:0]
		return
	}
	if v, ok := bytes.CutPrefix(l, []byte("data:")); ok {
		if len(m.data)+len(v) <= maxSSELine {
			if len(m.data) > 0 {
				m.data = append(m.data, '\n')
			}
			m.data = append(m.data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
}

// event reads one event's data when it may hold usage.
func (m *Meter) event(data []byte, c *counts) {
	if bytes.Contains(data, []byte(usageMarker)) {
		m.provider.usage(data, c)
	}
}

// eventStream reads AWS event stream messages: a prelude (total length,
// headers length, CRC), headers, payload, CRC. Only the events that may hold
// usage are parsed: ConverseStream's metadata, InvokeModelWithResponseStream's
// chunks (the last one's invocation metrics). The CRCs are the SDK's to check.
func (m *Meter) eventStream(p []byte) {
	if m.broken {
		return
	}
	m.buf = append(m.buf, p...)
	for len(m.buf) >= 12 {
		total := int(binary.BigEndian.Uint32(m.buf[0:4]))
		headers := int(binary.BigEndian.Uint32(m.buf[4:8]))
		if total < 16 || total > maxStreamFrame || headers > total-16 {
			m.broken, m.buf = true, nil
			return
		}
		if len(m.buf) < total {
			return
		}
		msg := m.buf[:total]
		h := eventHeaders(msg[12 : 12+headers])
		if h[":message-type"] == "event" && (h[":event-type"] == "metadata" || h[":event-type"] == "chunk") {
			m.provider.usage(msg[12+headers:total-4], &m.c)
		}
		m.buf = m.buf[total:]
	}
}

// eventHeaders decodes an event stream message's headers, keeping the
// string ones; it stops at the first it cannot read.
func eventHeaders(b []byte) map[string]string {
	out := map[string]string{}
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+1 {
			return out
		}
		name, kind := string(b[1:1+n]), b[1+n]
		b = b[2+n:]
		var size int
		switch kind {
		case 0, 1: // true, false
		case 2: // byte
			size = 1
		case 3: // short
			size = 2
		case 4: // int
			size = 4
		case 5, 8: // long, timestamp
			size = 8
		case 9: // uuid
			size = 16
		case 6, 7: // bytes, string
			if len(b) < 2 {
				return out
			}
			l := int(binary.BigEndian.Uint16(b))
			if len(b) < 2+l {
				return out
			}
			if kind == 7 {
				out[name] = string(b[2 : 2+l])
			}
			size = 2 + l
		default:
			return out
		}
		if len(b) < size {
			return out
		}
		b = b[size:]
	}
	return out
}
