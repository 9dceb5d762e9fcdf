// Package modelapi serves the model route,
// POST /sandbox/{sessionId}/model/{provider}/{path…}: a sandbox's model SDK
// calls it as it would the provider's API, with its sandbox token as API key.
// The handler has package modelgateway decide the call (token, provider,
// operation, model), then forwards it to the provider with the platform's
// credential in place of the sandbox's (the provider's key header, or a
// SigV4 signature with the function's own AWS credentials for Bedrock), and
// streams the answer back as it comes: status, headers (429 and Retry-After
// included) and body, Server-Sent Events and AWS event streams alike. The
// usage the answer reports is metered into the session once it has ended,
// even if the sandbox hung up before: the call runs to its end.
//
// Neither keys nor bodies are ever logged.
package modelapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

// Limits of a call.
const (
	// MaxRequestBytes bounds a call's body: a Lambda function URL's limit.
	MaxRequestBytes = 6 << 20
	// MaxCallDuration bounds a call, answer included: a Lambda function's
	// longest run.
	MaxCallDuration = 15 * time.Minute
	// chunk is how much of an answer is read (and flushed) at a time.
	chunk = 32 << 10
)

// Handlers serve the model route.
type Handlers struct {
	Gateway *modelgateway.Gateway
	// Client sends the calls upstream; nil: a client of its own.
	Client *http.Client
	// AWS signs Bedrock calls: its credentials and region.
	AWS aws.Config
	Log *slog.Logger
	// Metered, if set, hears the usage of every call once recorded (tests).
	Metered func(sessionID string, u session.Usage)
}

// Routes is the model route.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{{Method: http.MethodPost, Pattern: routes.PathModel, Stream: h.Model}}
}

// Model serves POST /sandbox/{sessionId}/model/{provider}/{proxy+}.
func (h *Handlers) Model(ctx context.Context, req httpapi.Request) (httpapi.Response, httpapi.BodyWriter) {
	sess, p, err := h.Gateway.Authorize(ctx, req.PathParameters["sessionId"], sandboxToken(req), req.PathParameters["provider"])
	if err != nil {
		return h.fail(ctx, err), nil
	}
	body, err := requestBody(req)
	if err != nil {
		return h.fail(ctx, err), nil
	}
	call, err := p.Parse(req.PathParameters["proxy"], body)
	if err != nil {
		return h.fail(ctx, err), nil
	}
	if err := h.Gateway.Allow(call); err != nil {
		return h.fail(ctx, err), nil
	}
	// No call starts past a spend cap: its most is held first.
	hold, err := h.Gateway.Admit(ctx, sess, call)
	if err != nil {
		return h.fail(ctx, err), nil
	}
	// The call outlives the sandbox's request: once answered it runs to its
	// end, so that what it used is metered even if the sandbox hangs up.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), MaxCallDuration)
	stop := context.AfterFunc(ctx, cancel)
	out, err := h.upstream(callCtx, req, call)
	if err == nil {
		err = h.authenticate(ctx, out, call)
	}
	if err != nil {
		cancel()
		h.Gateway.Release(context.WithoutCancel(ctx), hold)
		return h.fail(ctx, err), nil
	}
	began := time.Now()
	res, err := h.client().Do(out) //nolint:bodyclose // the answer's BodyWriter closes it, once streamed
	if err != nil {
		cancel()
		h.Gateway.Release(context.WithoutCancel(ctx), hold)
		return h.fail(ctx, apierror.Unavailable(fmt.Errorf("call %s: %w", p.Name, err))), nil
	}
	stop()
	if modelgateway.RateLimited(res.StatusCode, res.Header.Get) {
		h.Gateway.NoteRateLimit(context.WithoutCancel(ctx), sess)
	}
	answer := httpapi.Response{StatusCode: res.StatusCode, Headers: answerHeaders(res.Header)}
	return answer, func(w io.Writer, flush func()) error {
		defer cancel()
		defer func() { _ = res.Body.Close() }()
		h.relay(ctx, w, flush, res, sess, call, hold, began)
		return nil
	}
}

// relay streams the answer to the sandbox while it is there, and to its end
// regardless, metering a successful one.
func (h *Handlers) relay(ctx context.Context, w io.Writer, flush func(), res *http.Response, sess session.Session, call modelgateway.Call, hold session.Hold, began time.Time) {
	id := sess.ID
	var meter *modelgateway.Meter
	if res.StatusCode/100 == 2 {
		meter = modelgateway.NewMeter(call.Provider, res.Header.Get("Content-Type"), res.Header.Get)
	}
	buf := make([]byte, chunk)
	gone := false
	var readErr error
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			if meter != nil {
				_, _ = meter.Write(buf[:n])
			}
			if !gone {
				if _, werr := w.Write(buf[:n]); werr != nil {
					gone = true
				} else {
					flush()
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
	}
	attrs := []any{slog.String("session_id", id), slog.String("provider", call.Provider.Name), slog.String("model", call.Model),
		slog.Int("status", res.StatusCode), slog.Int64("duration_ms", time.Since(began).Milliseconds()), slog.Bool("sandbox_left", gone)}
	if readErr != nil {
		attrs = append(attrs, slog.String("error", readErr.Error()))
	}
	if meter != nil {
		u, reported := meter.Usage()
		if h.Gateway.Record(context.WithoutCancel(ctx), sess, call, hold, u, reported) == nil && h.Metered != nil {
			h.Metered(id, u)
		}
		attrs = append(attrs, slog.Int64("input_tokens", u.InputTokens), slog.Int64("output_tokens", u.OutputTokens), slog.Int64("cached_tokens", u.CachedTokens))
	} else {
		h.Gateway.Release(context.WithoutCancel(ctx), hold)
	}
	h.log().InfoContext(ctx, "model call", attrs...)
}

// upstream is the call to forward: the provider's URL for call's path, the
// query without any key, the body, and the sandbox's headers but for its
// credentials, hop-by-hop headers and those of the platform's own hops.
func (h *Handlers) upstream(ctx context.Context, req httpapi.Request, call modelgateway.Call) (*http.Request, error) {
	base, err := url.Parse(h.Gateway.Upstream(call.Provider))
	if err != nil {
		return nil, fmt.Errorf("upstream of %s: %w", call.Provider.Name, err)
	}
	u := *base
	u.RawPath = strings.TrimRight(base.EscapedPath(), "/") + "/" + call.Path
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, fmt.Errorf("upstream path: %w", err)
	}
	if req.RawQueryString != "" {
		q, err := url.ParseQuery(req.RawQueryString)
		if err != nil {
			return nil, apierror.New(apierror.InvalidRequest, "The query string is malformed.")
		}
		q.Del("key")
		u.RawQuery = q.Encode()
	}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(call.Body))
	if err != nil {
		return nil, fmt.Errorf("upstream request: %w", err)
	}
	for k, v := range req.Headers {
		if forwarded(k) {
			out.Header.Set(k, v)
		}
	}
	return out, nil
}

// authenticate puts the platform's credential on out.
func (h *Handlers) authenticate(ctx context.Context, out *http.Request, call modelgateway.Call) error {
	a := call.Provider.Auth
	if !a.SigV4 {
		key, err := h.Gateway.Key(ctx, call.Provider)
		if err != nil {
			return err
		}
		out.Header.Set(a.Header, a.Prefix+key)
		return nil
	}
	if h.AWS.Credentials == nil {
		return apierror.New(apierror.ModelUnavailable, "The platform has no AWS credentials for this model provider.")
	}
	creds, err := h.AWS.Credentials.Retrieve(ctx)
	if err != nil {
		return awserr.Classify(fmt.Errorf("AWS credentials for %s: %w", call.Provider.Name, err))
	}
	sum := sha256.Sum256(call.Body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, out, hex.EncodeToString(sum[:]), a.Service, h.AWS.Region, time.Now()); err != nil {
		return fmt.Errorf("sign the %s call: %w", call.Provider.Name, err)
	}
	return nil
}

// sandboxToken is the sandbox token, where the providers' SDKs put an API
// key: a bearer (OpenAI, Mistral, Bedrock), X-Api-Key (Anthropic) or
// X-Goog-Api-Key (Gemini).
func sandboxToken(req httpapi.Request) string {
	if tok := httpapi.BearerToken(req); tok != "" {
		return tok
	}
	if tok := httpapi.Header(req, "X-Api-Key"); tok != "" {
		return tok
	}
	return httpapi.Header(req, "X-Goog-Api-Key")
}

// requestBody is the call's body, bounded by MaxRequestBytes.
func requestBody(req httpapi.Request) ([]byte, error) {
	body, err := httpapi.Body(req, MaxRequestBytes)
	if apierror.CodeOf(err) == apierror.InvalidRequest && len(req.Body) > MaxRequestBytes {
		return nil, apierror.New(apierror.PayloadTooLarge, "The request body is larger than %d bytes.", MaxRequestBytes)
	}
	return body, err
}

// dropped are the request headers never forwarded: credentials (the
// sandbox's token among them), hop-by-hop headers, and what the client set
// for the hop to the platform (the transport sets its own encoding).
var dropped = map[string]bool{
	"authorization": true, "x-api-key": true, "x-goog-api-key": true, "api-key": true, "proxy-authorization": true, "cookie": true,
	"host": true, "content-length": true, "accept-encoding": true, "expect": true,
	"connection": true, "keep-alive": true, "proxy-connection": true, "te": true, "trailer": true, "transfer-encoding": true, "upgrade": true,
	"forwarded": true, "via": true, "x-real-ip": true,
	// The platform's accounts, not the sandbox's to choose.
	"openai-organization": true, "openai-project": true, "x-goog-user-project": true,
}

// forwarded reports whether the request header name goes upstream. AWS
// headers of the sandbox's hop (x-amz-*, x-amzn-*: dates, tokens, trace ids)
// do not: a Bedrock call is signed again. Bedrock's own (x-amzn-bedrock-*) do.
func forwarded(name string) bool {
	name = strings.ToLower(name)
	switch {
	case dropped[name]:
		return false
	case strings.HasPrefix(name, "x-amzn-bedrock-"):
		return true
	case strings.HasPrefix(name, "x-amz-"), strings.HasPrefix(name, "x-amzn-"), strings.HasPrefix(name, "x-forwarded-"), strings.HasPrefix(name, "cloudfront-"):
		return false
	}
	return true
}

// answerHeaders are the provider's answer headers, but for hop-by-hop ones,
// the length and encoding of a body the transport has decoded and that now
// streams, and cookies.
func answerHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		switch strings.ToLower(k) {
		case "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
			"content-length", "content-encoding", "set-cookie":
			continue
		}
		out[k] = strings.Join(vs, ", ")
	}
	return out
}

// client is Client, or one without an overall timeout (answers stream for
// minutes, within MaxCallDuration); either way it follows no redirect, which
// would take the platform's key elsewhere.
func (h *Handlers) client() *http.Client {
	c := http.Client{Transport: http.DefaultTransport}
	if h.Client != nil {
		c = *h.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (h *Handlers) log() *slog.Logger {
	if h.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Log
}

func (h *Handlers) fail(ctx context.Context, err error) httpapi.Response {
	return httpapi.Error(ctx, h.log(), err)
}
