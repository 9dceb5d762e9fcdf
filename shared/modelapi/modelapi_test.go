package modelapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/modelapi"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
	"github.com/remote-agents/remote-agents/shared/token"
)

const sessionID = "0b7d4b8e-8c1e-4a55-9d7f-1f2e3d4c5b6a"

// upstream is a provider's server: it records what reached it and answers
// with answer.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
}

func newUpstream(t *testing.T, answer http.HandlerFunc) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.requests, u.bodies = append(u.requests, r), append(u.bodies, string(body))
		u.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.requests) == 0 {
		t.Fatal("nothing reached the provider")
	}
	return u.requests[len(u.requests)-1], u.bodies[len(u.bodies)-1]
}

type fixture struct {
	// ctx is the sandbox's request's context: t.Context() if nil.
	ctx     context.Context
	store   *storetest.Memory
	h       *modelapi.Handlers
	sb      string
	metered chan session.Usage
}

// newFixture serves the model route for one working session, whose
// providers' calls go to base.
func newFixture(t *testing.T, base string) *fixture { return newPricedFixture(t, base, nil) }

// newPricedFixture is newFixture with calls costed by prices, for a session
// of the app tenant.
func newPricedFixture(t *testing.T, base string, prices modelgateway.Prices) *fixture {
	t.Helper()
	st := storetest.NewMemory()
	sb, sbHash := token.New(token.Sandbox)
	now := time.Now().UTC()
	if err := st.Create(t.Context(), session.Session{ID: sessionID, Tenant: tenant, State: session.Working, Generation: 1, SandboxTokenHash: sbHash, CreatedAt: now, UpdatedAt: now}, nil); err != nil {
		t.Fatal(err)
	}
	model := config.PlatformDefaults().Model
	for _, p := range []string{"anthropic", "openai", "gemini", "mistral", "bedrock"} {
		model.Upstreams[p] = base
	}
	keys := modelgateway.EnvKeys(func(name string) (string, bool) {
		v, ok := map[string]string{"ANTHROPIC_API_KEY": "platform-anthropic-key", "OPENAI_API_KEY": "platform-openai-key", "GEMINI_API_KEY": "platform-gemini-key"}[name]
		return v, ok
	})
	f := &fixture{store: st, sb: sb, metered: make(chan session.Usage, 4)}
	f.h = &modelapi.Handlers{
		Gateway: modelgateway.New(modelgateway.Options{Store: st, Model: model, Keys: keys, Region: "us-east-1", Prices: prices}),
		AWS:     aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDPLATFORM", "platform-secret", "platform-session")},
		Metered: func(_ string, u session.Usage) { f.metered <- u },
	}
	return f
}

// call sends a request to the route and reads the whole answer into w.
func (f *fixture) call(t *testing.T, provider, proxy, body string, headers map[string]string, w io.Writer) httpapi.Response {
	t.Helper()
	req := httpapi.Request{
		RawPath:        "/sandbox/" + sessionID + "/model/" + provider + "/" + proxy,
		Headers:        map[string]string{"content-type": "application/json"},
		PathParameters: map[string]string{"sessionId": sessionID, "provider": provider, "proxy": proxy},
		Body:           body,
	}
	if q, ok := headers["?"]; ok {
		req.RawQueryString = q
	}
	for k, v := range headers {
		if k != "?" {
			req.Headers[strings.ToLower(k)] = v
		}
	}
	ctx := f.ctx
	if ctx == nil {
		ctx = t.Context()
	}
	res, stream := f.h.Model(ctx, req)
	if stream != nil {
		_ = stream(w, func() {})
	} else {
		_, _ = io.WriteString(w, res.Body)
	}
	return res
}

func TestCredentialsAreThePlatforms(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"usage":{"input_tokens":3,"output_tokens":1}}`)
	})
	f := newFixture(t, up.URL)
	tests := []struct {
		provider, proxy, body string
		sandboxHeaders        map[string]string
		header, want          string
	}{
		{"anthropic", "v1/messages", `{"model":"claude-sonnet-4-5"}`, map[string]string{"X-Api-Key": f.sb, "Anthropic-Version": "2023-06-01"},
			"X-Api-Key", "platform-anthropic-key"},
		{"openai", "chat/completions", `{"model":"gpt-5"}`, map[string]string{"Authorization": "Bearer " + f.sb, "OpenAI-Organization": "org-sandbox"},
			"Authorization", "Bearer platform-openai-key"},
		{"gemini", "v1beta/models/gemini-2.5-pro:generateContent", `{}`, map[string]string{"X-Goog-Api-Key": f.sb, "?": "key=" + f.sb + "&alt=sse"},
			"X-Goog-Api-Key", "platform-gemini-key"},
	}
	for _, tt := range tests {
		headers := map[string]string{"Cookie": "a=b", "X-Forwarded-For": "10.0.0.1", "X-Amzn-Trace-Id": "Root=1", "Accept-Encoding": "br", "X-Stainless-Lang": "go"}
		for k, v := range tt.sandboxHeaders {
			headers[k] = v
		}
		var out bytes.Buffer
		res := f.call(t, tt.provider, tt.proxy, tt.body, headers, &out)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.provider, res.StatusCode, out.String())
		}
		r, body := up.last(t)
		if got := r.Header.Get(tt.header); got != tt.want {
			t.Errorf("%s: %s %q, want %q", tt.provider, tt.header, got, tt.want)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, f.sb) {
					t.Errorf("%s: the sandbox token reached the provider in %s", tt.provider, k)
				}
			}
		}
		if strings.Contains(r.URL.RawQuery, f.sb) {
			t.Errorf("%s: the sandbox token reached the provider in the query %s", tt.provider, r.URL.RawQuery)
		}
		for _, h := range []string{"Cookie", "X-Forwarded-For", "X-Amzn-Trace-Id", "OpenAI-Organization"} {
			if r.Header.Get(h) != "" {
				t.Errorf("%s: %s forwarded", tt.provider, h)
			}
		}
		if r.Header.Get("X-Stainless-Lang") != "go" || r.Header.Get("Accept-Encoding") == "br" || body != tt.body {
			t.Errorf("%s: headers %v, body %s", tt.provider, r.Header, body)
		}
		if tt.provider == "gemini" && r.URL.Query().Get("alt") != "sse" {
			t.Errorf("gemini: query %s, want alt=sse kept", r.URL.RawQuery)
		}
	}
}

// A Bedrock call is signed again with the platform's AWS credentials, for
// the model ID escaped as the SDK escapes it.
func TestBedrockCallsAreSignedByThePlatform(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"usage":{"inputTokens":3,"outputTokens":1}}`)
	})
	f := newFixture(t, up.URL)
	var out bytes.Buffer
	res := f.call(t, "bedrock", "model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/converse", `{"messages":[]}`,
		map[string]string{"Authorization": "Bearer " + f.sb, "X-Amz-Date": "20200101T000000Z", "X-Amz-Security-Token": "sandbox", "X-Amzn-Bedrock-Trace": "ENABLED"}, &out)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, out.String())
	}
	r, _ := up.last(t)
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDPLATFORM/") || !strings.Contains(auth, "/us-east-1/bedrock/aws4_request") {
		t.Errorf("Authorization %q", auth)
	}
	if r.Header.Get("X-Amz-Security-Token") != "platform-session" || r.Header.Get("X-Amz-Date") == "20200101T000000Z" || r.Header.Get("X-Amzn-Bedrock-Trace") != "ENABLED" {
		t.Errorf("headers %v", r.Header)
	}
	if r.URL.EscapedPath() != "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse" {
		t.Errorf("path %s", r.URL.EscapedPath())
	}
	if u := <-f.metered; u.InputTokens != 3 || u.OutputTokens != 1 {
		t.Errorf("metered %+v", u)
	}
}

// The provider's refusals reach the sandbox as they came: 429 with
// Retry-After, its body; nothing is metered.
// tenant is the fixture session's app.
const tenant = "tenant-1"

// TestCallsAreCostedByThePriceTable: a metered call is costed by the price
// table on its session, and added to its app's spend of the day.
func TestCallsAreCostedByThePriceTable(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"usage":{"input_tokens":1000,"output_tokens":500}}`)
	})
	f := newPricedFixture(t, up.URL, modelgateway.Prices{"claude-sonnet-4": {Input: 3, Output: 15, CachedInput: 0.3}})
	var out bytes.Buffer
	if res := f.call(t, "anthropic", "v1/messages", `{"model":"claude-sonnet-4-5"}`, map[string]string{"X-Api-Key": f.sb}, &out); res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, out.String())
	}
	<-f.metered
	// 1,000 × 3 + 500 × 15 micro-USD.
	got, _ := f.store.Get(t.Context(), sessionID)
	if u := got.Usage(); u.CostMicroUSD != 10500 || u.CostUSD != 0.0105 {
		t.Errorf("usage %+v, want 10500 micro-USD", u)
	}
	if spent, err := f.store.Spend(t.Context(), tenant, time.Now().UTC().Truncate(24*time.Hour)); err != nil || spent != 10500 {
		t.Errorf("the app's spend today: %d %v", spent, err)
	}
}

func TestRateLimitsPassThrough(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
	})
	f := newFixture(t, up.URL)
	var out bytes.Buffer
	res := f.call(t, "anthropic", "v1/messages", `{"model":"claude-sonnet-4-5"}`, map[string]string{"X-Api-Key": f.sb}, &out)
	if res.StatusCode != http.StatusTooManyRequests || res.Headers["Retry-After"] != "7" || res.Headers["Anthropic-Ratelimit-Requests-Remaining"] != "0" ||
		out.String() != `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}` {
		t.Errorf("%d %v %s", res.StatusCode, res.Headers, out.String())
	}
	got, _ := f.store.Get(t.Context(), sessionID)
	if got.Usage() != (session.Usage{}) {
		t.Errorf("a refused call was metered: %+v", got.Usage())
	}
	// The session remembers it was limited (a job's alerts say so).
	if got.RateLimitedAt.IsZero() {
		t.Error("the rate limit was not recorded on the session")
	}
}

func TestRateLimitedReadsTheBudgetHeaders(t *testing.T) {
	for _, c := range []struct {
		status  int
		headers map[string]string
		want    bool
	}{
		{429, nil, true},
		{200, nil, false},
		{200, map[string]string{"X-Ratelimit-Limit-Requests": "100", "X-Ratelimit-Remaining-Requests": "9"}, true},
		{200, map[string]string{"X-Ratelimit-Limit-Requests": "100", "X-Ratelimit-Remaining-Requests": "10"}, false},
		{200, map[string]string{"Anthropic-Ratelimit-Requests-Limit": "50", "Anthropic-Ratelimit-Requests-Remaining": "1"}, true},
		{200, map[string]string{"Anthropic-Ratelimit-Requests-Limit": "x", "Anthropic-Ratelimit-Requests-Remaining": "1"}, false},
	} {
		h := http.Header{}
		for k, v := range c.headers {
			h.Set(k, v)
		}
		if got := modelgateway.RateLimited(c.status, h.Get); got != c.want {
			t.Errorf("%d %v: %v, want %v", c.status, c.headers, got, c.want)
		}
	}
}

// failingWriter is a sandbox that hangs up at its second read: its
// request's context ends and writes to it fail.
type failingWriter struct {
	n      int
	hangUp func()
	// wrote is closed by the first write, gone by the second.
	wrote, gone chan struct{}
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n++; w.n > 1 {
		if w.n == 2 {
			w.hangUp()
			close(w.gone)
		}
		return 0, errors.New("connection reset by peer")
	}
	close(w.wrote)
	return len(p), nil
}

// A sandbox that hangs up before a stream's last event (where the usage
// is) is metered all the same: the call runs to its end.
func TestCallsAreMeteredWhenTheSandboxHangsUp(t *testing.T) {
	t.Parallel()
	more, last := make(chan struct{}), make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []struct {
			event string
			after chan struct{}
		}{
			{`{"choices":[{"delta":{"content":"Hello"}}],"usage":null}`, more},
			{`{"choices":[{"delta":{"content":" there"}}],"usage":null}`, last},
			{`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4}}`, nil},
		} {
			fmt.Fprintf(w, "data: %s\n\n", part.event)
			w.(http.Flusher).Flush()
			if part.after != nil {
				<-part.after
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	f := newFixture(t, up.URL)
	ctx, hangUp := context.WithCancel(t.Context())
	f.ctx = ctx
	w := &failingWriter{hangUp: hangUp, wrote: make(chan struct{}), gone: make(chan struct{})}
	done := make(chan httpapi.Response)
	go func() {
		done <- f.call(t, "openai", "chat/completions", `{"model":"gpt-5","stream":true}`, map[string]string{"Authorization": "Bearer " + f.sb}, w)
	}()
	<-w.wrote // the first event reached the sandbox
	close(more)
	<-w.gone // the sandbox hung up at the second
	close(last)
	<-done
	if u := <-f.metered; u != (session.Usage{InputTokens: 12, OutputTokens: 4, Calls: 1}) {
		t.Errorf("metered %+v", u)
	}
	_, body := up.last(t)
	var sent map[string]any
	if err := json.Unmarshal([]byte(body), &sent); err != nil || fmt.Sprint(sent["stream_options"]) != "map[include_usage:true]" {
		t.Errorf("the stream was not asked for its usage: %s", body)
	}
	if got, _ := f.store.Get(t.Context(), sessionID); got.Usage() != (session.Usage{InputTokens: 12, OutputTokens: 4, Calls: 1}) {
		t.Errorf("session usage %+v", got.Usage())
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	f := newFixture(t, up.URL)
	big := `{"model":"gpt-5","pad":"` + strings.Repeat("x", modelapi.MaxRequestBytes) + `"}`
	tests := []struct {
		name, provider, proxy, body string
		headers                     map[string]string
		status                      int
		code                        string
	}{
		{"no token", "openai", "chat/completions", `{"model":"gpt-5"}`, nil, 401, "missing_token"},
		{"a body past the bound", "openai", "chat/completions", big, map[string]string{"Authorization": "Bearer " + f.sb}, 413, "payload_too_large"},
		{"another operation", "openai", "files", `{}`, map[string]string{"Authorization": "Bearer " + f.sb}, 404, "not_found"},
		{"no key for the provider", "mistral", "chat/completions", `{"model":"mistral-large-latest"}`, map[string]string{"Authorization": "Bearer " + f.sb}, 503, "model_unavailable"},
		// The provider's redirect is passed back, not followed with the key.
		{"a redirect", "openai", "chat/completions", `{"model":"gpt-5"}`, map[string]string{"Authorization": "Bearer " + f.sb}, 307, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			res := f.call(t, tt.provider, tt.proxy, tt.body, tt.headers, &out)
			var env struct {
				Code string `json:"error_code"`
			}
			_ = json.Unmarshal(out.Bytes(), &env)
			if res.StatusCode != tt.status || env.Code != tt.code {
				t.Errorf("%d %s, want %d %s", res.StatusCode, out.String(), tt.status, tt.code)
			}
		})
	}
	down := newFixture(t, "http://127.0.0.1:1")
	var out bytes.Buffer
	if res := down.call(t, "openai", "chat/completions", `{"model":"gpt-5"}`, map[string]string{"Authorization": "Bearer " + down.sb}, &out); res.StatusCode != 503 || !strings.Contains(out.String(), "service_unavailable") {
		t.Errorf("provider unreachable: %d %s", res.StatusCode, out.String())
	}
}
