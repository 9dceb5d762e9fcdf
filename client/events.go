package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/api/schema"
)

// Event types of the events stream (the document's EventMessage lists them
// all, with a *Data schema each).
const (
	EventAgentMessage        = string(schema.EventMessageTypeAgentMessage)
	EventAgentError          = string(schema.EventMessageTypeAgentError)
	EventAgentQuestion       = string(schema.EventMessageTypeAgentQuestion)
	EventToolCall            = string(schema.EventMessageTypeToolCall)
	EventStateChanged        = string(schema.EventMessageTypeStateChanged)
	EventTokenLimit          = string(schema.EventMessageTypeSessionTokenLimit)
	EventEnvRequest          = string(schema.EventMessageTypeEnvRequest)
	EventUserMessage         = string(schema.EventMessageTypeUserMessage)
	EventEnvSubmitted        = string(schema.EventMessageTypeEnvSubmitted)
	EventOutputVerification  = string(schema.EventMessageTypeOutputVerification)
	EventOutputSnapshot      = string(schema.EventMessageTypeOutputSnapshot)
	EventAutomationCompleted = string(schema.EventMessageTypeAutomationCompleted)
)

// Event is one event of an agent.
type Event struct {
	// Seq is the event's sequence number (its SSE id): increasing, no gaps.
	Seq  int64     `json:"seq"`
	Type string    `json:"type"`
	At   time.Time `json:"at"`
	// Data is the event's payload, a JSON object whose fields depend on Type
	// (api/openapi.json, the *Data schemas).
	Data json.RawMessage `json:"data,omitempty"`
}

// Decode decodes the event's data into v.
func (e Event) Decode(v any) error {
	if len(e.Data) == 0 {
		return json.Unmarshal([]byte("{}"), v)
	}
	return json.Unmarshal(e.Data, v)
}

// Text is the data's text, for the events that have one (agent.message,
// agent.error, agent.question, user.message).
func (e Event) Text() string {
	var d struct {
		Text string `json:"text"`
	}
	_ = e.Decode(&d)
	return d.Text
}

// EventsOption configures Events.
type EventsOption func(*eventsConfig)

type eventsConfig struct{ after int64 }

// After starts the stream after the event with sequence number seq (0: from
// the first event).
func After(seq int64) EventsOption { return func(c *eventsConfig) { c.after = seq } }

// reconnectDelay is how long Events waits before reconnecting unless the
// server's retry hint says otherwise.
const reconnectDelay = time.Second

// Events streams the agent's events, in order, until the agent has ended and
// every event is out, ctx ends, or the loop stops. A stream that drops (the
// server ends streams now and then; networks fail) is resumed with
// Last-Event-ID after the server's retry hint: no event is lost or repeated.
// An error (the API's *Error, or a stream that cannot be reopened after the
// client's retries) is yielded last.
func (c *Client) Events(ctx context.Context, agentID, token string, opts ...EventsOption) iter.Seq2[Event, error] {
	var cfg eventsConfig
	for _, o := range opts {
		o(&cfg)
	}
	return func(yield func(Event, error) bool) {
		s := &stream{c: c, ctx: ctx, path: expand(pathEvents, agentID), token: token, last: cfg.after, delay: reconnectDelay}
		err := s.run(yield)
		if err != nil && !errors.Is(err, errStopped) {
			yield(Event{}, err)
		}
	}
}

var (
	errStopped = errors.New("stopped")
	errEnded   = errors.New("ended")
)

type stream struct {
	c           *Client
	ctx         context.Context
	path, token string
	last        int64
	delay       time.Duration
}

// run connects and reads until the stream ends for good.
func (s *stream) run(yield func(Event, error) bool) error {
	failures := 0
	for {
		opened, err := s.connect(yield)
		switch {
		case errors.Is(err, errEnded):
			return nil
		case errors.Is(err, errStopped):
			return err
		case s.ctx.Err() != nil:
			return s.ctx.Err()
		}
		var apiErr *Error
		if errors.As(err, &apiErr) && !apiErr.Retryable {
			return err
		}
		// A stream that opened and then ended or dropped is resumed (streams
		// end now and then by design); failing to open one, or an outage
		// the stream reports, counts towards the client's retries.
		if opened && apiErr == nil {
			failures = 0
		} else if failures++; failures > s.c.maxRetries {
			return fmt.Errorf("remote agents: events stream: %w", err)
		}
		wait := s.delay
		if apiErr != nil && apiErr.RetryAfter() > 0 {
			wait = apiErr.RetryAfter()
		}
		if err := s.c.sleep(s.ctx, wait); err != nil {
			return err
		}
	}
}

// connect opens the stream after s.last and reads it until it ends. It
// reports whether the stream opened.
func (s *stream) connect(yield func(Event, error) bool) (bool, error) {
	// The token goes in X-Session-Token, not Authorization: on AWS the
	// stream's requests are signed on their way (CloudFront's origin access
	// control), which overwrites Authorization.
	headers := []string{"Accept", "text/event-stream", "X-Session-Token", s.token}
	if s.last > 0 {
		headers = append(headers, "Last-Event-ID", strconv.FormatInt(s.last, 10))
	}
	res, err := s.c.send(s.ctx, http.MethodGet, s.path, "", nil, headers...)
	if err != nil {
		return false, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return false, decodeError(res, raw)
	}
	return true, s.read(res.Body, yield)
}

// read reads frames until the body ends or fails.
func (s *stream) read(body io.Reader, yield func(Event, error) bool) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var id, event string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			if strings.HasPrefix(line, ":") {
				continue // a comment: keep-alive
			}
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "id":
				id = value
			case "event":
				event = value
			case "data":
				data = append(data, value)
			case "retry":
				if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
					s.delay = time.Duration(ms) * time.Millisecond
				}
			}
			continue
		}
		// A blank line dispatches the frame.
		frameID, frameEvent, frameData := id, event, strings.Join(data, "\n")
		id, event, data = "", "", nil
		switch frameEvent {
		case "":
			continue // a retry hint alone
		case "end":
			return errEnded
		case "unavailable":
			e := &Error{}
			if err := json.Unmarshal([]byte(frameData), e); err != nil || e.Code == "" {
				e = &Error{Code: CodeServiceUnavailable, Message: "The events cannot be read now.", Retryable: true}
			}
			return e
		}
		seq, err := strconv.ParseInt(frameID, 10, 64)
		if err != nil || seq <= s.last {
			continue // not an agent event, or one already seen
		}
		var ev Event
		if err := json.Unmarshal([]byte(frameData), &ev); err != nil {
			return fmt.Errorf("remote agents: event %d: %w", seq, err)
		}
		s.last = seq
		if !yield(ev, nil) {
			return errStopped
		}
	}
	return sc.Err()
}
