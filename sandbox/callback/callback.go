// Package callback is the sandbox's client of the gateway-mediated tools: it posts
// POST /proliferate/{sessionId}/tools/{toolName} with the sandbox token and the
// call's tool_call_id, and turns every outcome into a tool result.
//
//   - Each attempt has its own timeout (120 s).
//   - Transport failures (reset, refused, timeouts), an unreadable result and
//     retryable answers (429, 5xx; never another 4xx) are retried with
//     exponential backoff and jitter (package retry), after Retry-After when the
//     gateway sends it, up to 5 times, always with the same tool_call_id, so that
//     a call that did land is replayed, not run twice. The context bounds it all.
//   - 202 pending is polled by posting the same call again after retry_after.
//   - Nothing panics or returns an error to the agent loop: failures come back as
//     {success: false, result: "…"}, which the model reads as the tool's output.
package callback

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/retry"
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

// Client calls the gateway for one session. Zero fields take the defaults.
type Client struct {
	Gateway   string
	SessionID string
	Token     string
	// HTTP is the client to use; nil is a client without an overall timeout
	// (each attempt has AttemptTimeout).
	HTTP           *http.Client
	AttemptTimeout time.Duration
	// MaxRetries is how often a failed attempt is retried; negative: never.
	MaxRetries int
	// BaseDelay is the first wait before a retry; the next ones double, up to
	// MaxDelay, each randomised by ±50%.
	BaseDelay  time.Duration
	MaxPending time.Duration
	// Sleep waits before polling a pending call; nil sleeps for real (tests
	// shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
}

func (c *Client) defaults() Client {
	d := *c
	d.HTTP = cmp.Or(d.HTTP, &http.Client{})
	d.AttemptTimeout = cmp.Or(d.AttemptTimeout, AttemptTimeout)
	d.MaxRetries = max(cmp.Or(d.MaxRetries, MaxRetries), 0)
	d.BaseDelay = cmp.Or(d.BaseDelay, BaseDelay)
	d.MaxPending = cmp.Or(d.MaxPending, MaxPending)
	if d.Sleep == nil {
		d.Sleep = sleep
	}
	return d
}

// outcome is what one attempt got: a result, or how long to wait before
// polling a pending call.
type outcome struct {
	res     Result
	pending time.Duration
}

// Call runs a gateway tool and returns its result; it never fails otherwise.
func (c *Client) Call(ctx context.Context, tool, toolCallID string, args any) Result {
	o := c.defaults()
	body, err := json.Marshal(map[string]any{"tool_call_id": toolCallID, "args": args})
	if err != nil {
		return failure("The tool's arguments could not be encoded.")
	}
	u := strings.TrimRight(o.Gateway, "/") + "/proliferate/" + url.PathEscape(o.SessionID) + "/tools/" + url.PathEscape(tool)
	policy := retry.Policy{Retries: o.MaxRetries, Initial: o.BaseDelay, Max: MaxDelay}
	pendingSince := time.Time{}
	for {
		out, err := retry.Do(ctx, policy, func() (outcome, error) { return o.attempt(ctx, u, body) })
		switch {
		case ctx.Err() != nil:
			return failure("The tool call was cancelled.")
		case err != nil && out.res.Result != "":
			return out.res // the gateway's own words
		case err != nil:
			return failure(fmt.Sprintf("The gateway could not be reached for %s: %s", tool, err.Error()))
		case out.pending == 0:
			return out.res
		}
		// Pending: poll with the same id.
		if pendingSince.IsZero() {
			pendingSince = time.Now()
		}
		if time.Since(pendingSince) > o.MaxPending {
			return failure(fmt.Sprintf("%s is still running after %s; try again later with the same call.", tool, o.MaxPending))
		}
		if err := o.Sleep(ctx, out.pending); err != nil {
			return failure("The tool call was cancelled.")
		}
	}
}

// attempt posts once. It returns the result, or how long to wait before polling
// a pending call, or an error marked for retry.Do: transport failures, an
// unreadable result, 429 and 5xx are worth retrying, other answers are not.
func (c Client) attempt(ctx context.Context, u string, body []byte) (outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return outcome{}, retry.Permanent(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.HTTP.Do(req)
	if err != nil {
		return outcome{}, transportError(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return outcome{}, transportError(err)
	}
	var out struct {
		Result
		Status            any    `json:"status"`
		Message           string `json:"message"`
		RetryAfterSeconds int    `json:"retry_after_seconds"`
	}
	decodeErr := json.Unmarshal(raw, &out)
	switch {
	case res.StatusCode == http.StatusAccepted:
		return outcome{pending: time.Duration(max(out.RetryAfterSeconds, 1)) * time.Second}, nil
	case res.StatusCode == http.StatusOK && decodeErr == nil:
		out.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
		return outcome{res: out.Result}, nil
	case res.StatusCode == http.StatusOK:
		return outcome{}, errors.New("the gateway answered with an unreadable result")
	}
	msg := cmp.Or(out.Message, http.StatusText(res.StatusCode))
	return outcome{res: failure(msg)}, retry.Status(fmt.Errorf("gateway answered %d: %s", res.StatusCode, msg), res.StatusCode, res.Header)
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
