package devserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
)

// maxRequestBytes is API Gateway's payload limit (10 MB); handlers bound further.
const maxRequestBytes = 10 << 20

// handlerTimeout is the deadline a handler's context gets, as a Lambda function
// behind API Gateway (30 s at most) would.
const handlerTimeout = 29 * time.Second

// gateway turns HTTP requests into API Gateway HTTP API events and back, like API
// Gateway in front of the Lambda functions.
type gateway struct {
	routes []httpapi.Route
	// functions names the function of each route key (routes.All).
	functions map[string]string
	// closing ends streams when the server closes.
	closing context.Context
	// internal authorizes the /internal/ routes (IAM on AWS).
	internal *iamAuth
}

// canonicalPaths answers a path that is not clean (an empty segment, "."
// or "..", escaped or not) with the envelope's not_found, as API Gateway
// matches paths as sent; http.ServeMux would redirect it to the clean path
// (and a client following that 307 would send a POST again). Segments are
// the escaped path's: an escaped slash is part of one (a push connection's
// id may hold one).
func canonicalPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cleanPath(r.URL.EscapedPath()) {
			writeResponse(w, httpapi.Error(r.Context(), nil, apierror.New(apierror.NotFound, "No such route.")))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath reports whether escaped, a URL's escaped path, has no empty,
// "." or ".." segment (a last empty one, a trailing slash, aside).
func cleanPath(escaped string) bool {
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, seg := range segs {
		s, err := url.PathUnescape(seg)
		if err != nil || s == "." || s == ".." || (s == "" && i < len(segs)-1) {
			return false
		}
	}
	return true
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, params, methodOK := g.match(r.Method, r.URL.Path)
	switch {
	case route == nil && methodOK:
		res := httpapi.Error(r.Context(), nil, apierror.New(apierror.MethodNotAllowed, "Method %s is not allowed here.", r.Method))
		res.Headers["Allow"] = strings.Join(httpapi.AllowedMethods(g.routes, r.URL.Path), ", ")
		writeResponse(w, res)
		return
	case route == nil:
		writeResponse(w, httpapi.Error(r.Context(), nil, apierror.New(apierror.NotFound, "No such route.")))
		return
	}
	// A body declared larger than the limit is refused before any of it is read.
	if r.ContentLength > maxRequestBytes {
		writeResponse(w, httpapi.Error(r.Context(), nil, apierror.New(apierror.PayloadTooLarge, "The request body is too large.")))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		writeResponse(w, httpapi.Error(r.Context(), nil, apierror.New(apierror.InvalidRequest, "The request body could not be read.")))
		return
	}
	if len(body) > maxRequestBytes {
		writeResponse(w, httpapi.Error(r.Context(), nil, apierror.New(apierror.PayloadTooLarge, "The request body is too large.")))
		return
	}
	ev := toEvent(r, route, params, body)
	if strings.HasPrefix(r.URL.Path, routes.InternalPrefix) {
		if res, ok := g.internal.authorize(r, body, &ev, route.Stream != nil); !ok {
			writeResponse(w, res)
			return
		}
	}
	if route.Stream != nil {
		ctx, cancel := context.WithCancel(withFunction(r.Context(), g.functions[route.Key()]))
		defer cancel()
		stop := context.AfterFunc(g.closing, cancel)
		defer stop()
		res, stream := route.Stream(ctx, ev)
		serveStream(w, res, stream)
		return
	}
	// A Lambda function's context ends at its timeout; API Gateway gives up
	// at 30 s. A closing server ends it too: a handler waiting out its time
	// (a workspace tool's result) would hold the server's shutdown.
	ctx, cancel := context.WithTimeout(withFunction(r.Context(), g.functions[route.Key()]), handlerTimeout)
	defer cancel()
	stop := context.AfterFunc(g.closing, cancel)
	defer stop()
	res, err := route.Handler(ctx, ev)
	if err != nil {
		res = httpapi.Error(r.Context(), nil, err)
	}
	writeResponse(w, res)
}

// match finds the route for method and path. methodOK reports that the path
// matched some route, for 405 against 404.
func (g *gateway) match(method, path string) (*httpapi.Route, map[string]string, bool) {
	pathMatched := false
	for i := range g.routes {
		rt := &g.routes[i]
		params, ok := httpapi.MatchPath(rt.Pattern, path)
		if !ok {
			continue
		}
		pathMatched = true
		if rt.Method == method || (method == http.MethodOptions && rt.CORS) {
			return rt, params, true
		}
	}
	return nil, nil, pathMatched
}

func toEvent(r *http.Request, rt *httpapi.Route, params map[string]string, body []byte) httpapi.Request {
	headers := make(map[string]string, len(r.Header)+1)
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = r.Host
	// As API Gateway does: the cookies apart, not a header.
	delete(headers, "cookie")
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	query := map[string]string{}
	for k, v := range r.URL.Query() {
		query[k] = strings.Join(v, ",")
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev := httpapi.Request{
		Version:               "2.0",
		RouteKey:              rt.Key(),
		RawPath:               r.URL.Path,
		RawQueryString:        r.URL.RawQuery,
		Headers:               headers,
		Cookies:               cookies,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:  rt.Key(),
			Stage:     "$default",
			RequestID: newRequestID(),
			Time:      time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch: time.Now().UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  host,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

func writeResponse(w http.ResponseWriter, res httpapi.Response) {
	for k, v := range res.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range res.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range res.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(res.Body)
	if res.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(res.Body); err == nil {
			body = b
		}
	}
	status := res.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// serveStream writes a streaming route's answer as it is produced, like a Lambda
// function URL with response streaming.
func serveStream(w http.ResponseWriter, res httpapi.Response, body httpapi.BodyWriter) {
	if body == nil {
		writeResponse(w, res)
		return
	}
	for k, v := range res.Headers {
		w.Header().Set(k, v)
	}
	status := res.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	flush := func() { _ = rc.Flush() }
	flush()
	_ = body(w, flush) // the stream ends when the client goes or the handler is done
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
