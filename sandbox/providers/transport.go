package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/retry"
)

// retrying is an http.RoundTripper that tries a request again when it fails in a
// way worth retrying: a transport failure, 429 or 5xx, after the wait the server
// asks for (a Retry-After header, or the RetryInfo of a Google API error) or
// else with exponential backoff (sandbox/retry), up to retries times and within
// the request's context. The last answer is returned as it came, so that the
// SDK above reports the API's error. For SDKs whose own retries ignore the
// server's wait (Google's genai).
type retrying struct {
	base    http.RoundTripper
	retries int
}

// maxErrorBody bounds the error body read to find a RetryInfo.
const maxErrorBody = 64 << 10

// RoundTrip sends req, again as needed. A request whose body cannot be
// replayed (no GetBody) is sent once.
func (t retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.retries <= 0 || req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	attempt := 0
	resp, err := retry.Do(ctx, retry.Policy{Retries: t.retries}, func() (*http.Response, error) {
		attempt++
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, retry.Permanent(fmt.Errorf("replay request body: %w", err))
				}
				r.Body = body
			}
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			if ctx.Err() != nil {
				return nil, retry.Permanent(err)
			}
			return nil, err
		}
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < http.StatusInternalServerError {
			return resp, nil
		}
		// Keep the body, so that the last answer reaches the SDK whole and the
		// connection is released.
		body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if readErr != nil {
			return resp, retry.Permanent(fmt.Errorf("read %s: %w", resp.Status, readErr))
		}
		header := resp.Header
		if _, ok := retry.RetryAfter(header); !ok {
			if wait, ok := retryInfo(body); ok {
				header = header.Clone()
				header.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			}
		}
		return resp, retry.Status(errors.New(resp.Status), resp.StatusCode, header)
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, err // ended while waiting to retry
	case resp != nil:
		return resp, nil
	}
	return nil, err
}

// retryInfo returns the wait a Google API error asks for in its
// google.rpc.RetryInfo detail ({"error":{"details":[{"@type":
// "type.googleapis.com/google.rpc.RetryInfo","retryDelay":"23s"}]}}).
func retryInfo(body []byte) (time.Duration, bool) {
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0, false
	}
	for _, d := range e.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if wait, err := time.ParseDuration(d.RetryDelay); err == nil && wait >= 0 {
				return wait, true
			}
		}
	}
	return 0, false
}
