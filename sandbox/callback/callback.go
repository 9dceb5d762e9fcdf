// Package callback is the sandbox's client of the gateway-mediated tools: it posts
// POST /proliferate/{sessionId}/tools/{toolName} with the sandbox token and the
// call's tool_call_id, and turns every outcome into a tool result.
//
//   - Each attempt has its own timeout (120 s).
//   - Transport failures (reset, refused, timeouts) and retryable answers (429,
//     5xx, an envelope with retryable: true) are retried with exponential backoff,
//     up to 5 times, always with the same tool_call_id, so that a call that did
//     land is replayed, not run twice.
//   - 202 pending is polled by posting the same call again after retry_after.
//   - Nothing panics or returns an error to the agent loop: failures come back as
//     {success: false, result: "…"}, which the model reads as the tool's output.
package callback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of a Client.
const (
	AttemptTimeout = 120 * time.Second
	MaxRetries     = 5
	BaseDelay      = 500 * time.Millisecond
	MaxDelay       = 15 * time.Second
	// MaxPending bounds how long a pending call is polled.
	MaxPending = 30 * time.Minute
)

// Result is a tool's answer.
type Result struct {
	Success bool           `json:"success"`
	Result  string         `json:"result"`
	Data    map[string]any `json:"data,omitempty"`
	// Replayed is set when the gateway answered with a stored result.
	Replayed bool `json:"-"`
}

// Client calls the gateway for one session.
type Client struct {
	Gateway   string
	SessionID string
	Token     string
	// HTTP is the client to use; nil is a client without an overall timeout
	// (each attempt has AttemptTimeout).
	HTTP           *http.Client
	AttemptTimeout time.Duration
	MaxRetries     int
	BaseDelay      time.Duration
	MaxPending     time.Duration
	// Sleep waits between attempts; nil sleeps for real (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
}

func (c *Client) defaults() Client {
	d := *c
	if d.HTTP == nil {
		d.HTTP = &http.Client{}
	}
	if d.AttemptTimeout <= 0 {
		d.AttemptTimeout = AttemptTimeout
	}
	if d.MaxRetries < 0 {
		d.MaxRetries = 0
	} else if d.MaxRetries == 0 {
		d.MaxRetries = MaxRetries
	}
	if d.BaseDelay <= 0 {
		d.BaseDelay = BaseDelay
	}
	if d.MaxPending <= 0 {
		d.MaxPending = MaxPending
	}
	if d.Sleep == nil {
		d.Sleep = sleep
	}
	return d
}

// Call runs a gateway tool and returns its result; it never fails otherwise.
func (c *Client) Call(ctx context.Context, tool, toolCallID string, args any) Result {
	o := c.defaults()
	body, err := json.Marshal(map[string]any{"tool_call_id": toolCallID, "args": args})
	if err != nil {
		return failure("The tool's arguments could not be encoded.")
	}
	u := strings.TrimRight(o.Gateway, "/") + "/proliferate/" + url.PathEscape(o.SessionID) + "/tools/" + url.PathEscape(tool)
	retries := 0
	pendingSince := time.Time{}
	for {
		res, wait, retry, perr := o.attempt(ctx, u, body)
		switch {
		case ctx.Err() != nil:
			return failure("The tool call was cancelled.")
		case perr == nil && wait == 0:
			return res
		case wait > 0: // pending: poll with the same id
			if pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			if time.Since(pendingSince) > o.MaxPending {
				return failure(fmt.Sprintf("%s is still running after %s; try again later with the same call.", tool, o.MaxPending))
			}
			if err := o.Sleep(ctx, wait); err != nil {
				return failure("The tool call was cancelled.")
			}
			continue
		case !retry || retries >= o.MaxRetries:
			if res.Result != "" {
				return res
			}
			return failure(fmt.Sprintf("The gateway could not be reached for %s: %s", tool, perr.Error()))
		}
		delay := min(o.BaseDelay<<retries, MaxDelay)
		retries++
		if err := o.Sleep(ctx, delay); err != nil {
			return failure("The tool call was cancelled.")
		}
	}
}

// attempt posts once. It returns the result, or how long to wait before polling
// a pending call, or an error and whether it is worth retrying.
func (c Client) attempt(ctx context.Context, u string, body []byte) (Result, time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return Result{}, 0, false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.HTTP.Do(req)
	if err != nil {
		return Result{}, 0, true, transportError(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return Result{}, 0, true, transportError(err)
	}
	var out struct {
		Result
		Status            any    `json:"status"`
		Message           string `json:"message"`
		Retryable         bool   `json:"retryable"`
		RetryAfterSeconds int    `json:"retry_after_seconds"`
	}
	decodeErr := json.Unmarshal(raw, &out)
	switch {
	case res.StatusCode == http.StatusAccepted:
		wait := time.Duration(max(out.RetryAfterSeconds, 1)) * time.Second
		return Result{}, wait, false, nil
	case res.StatusCode == http.StatusOK && decodeErr == nil:
		out.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
		return out.Result, 0, false, nil
	case res.StatusCode == http.StatusOK:
		return Result{}, 0, true, errors.New("the gateway answered with an unreadable result")
	}
	msg := out.Message
	if msg == "" {
		msg = http.StatusText(res.StatusCode)
	}
	retry := out.Retryable || res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500
	return failure(msg), 0, retry, fmt.Errorf("gateway answered %d: %s", res.StatusCode, msg)
}

// transportError says what went wrong without the URL (it names the session).
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("the attempt timed out")
	}
	return err
}

func failure(msg string) Result { return Result{Success: false, Result: msg} }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
