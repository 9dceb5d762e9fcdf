// Package embedview serves the embed view, GET /embed/{id}?token=…: a self-contained
// chat page for one agent, meant for an iframe. It has a thread, a composer and
// the agent's questions as buttons, and nothing else (no header, navigation or
// links out). The optional parts (file upload, context usage, microphone) are in
// the page only when the session's feature flags or the URL turn them on; off,
// they are absent from the DOM.
//
// The thread starts with the session's initial prompt, as the user's first
// message; the agent's messages come from the event stream, Markdown rendered
// to sanitised HTML by the server (eventsapi), tool calls as compact lines that
// open to their arguments and output. The page follows prefers-color-scheme;
// ?accent=%23rrggbb (or #rgb) sets its accent colour, checked strictly here and
// written into the style as a colour, never as given.
//
// The page is scoped to the agent its token names: a missing or wrong token gets
// a plain error page. Its script and style are inline and allowed by hash in the
// Content-Security-Policy, which also lists who may frame it (frame-ancestors:
// the page's own origin and remote_agents.allowed_origins). The token leaves the
// address bar as soon as the page runs and is never sent as a referrer.
//
// With Handlers.LiveURL set, the page reads its events from the viewers'
// WebSocket ("live"): the stored events, pushed as they are appended, and the
// ephemeral ones (a reply's text as it is written, a tool call as it starts).
// It syncs on that socket with the session token, in order and without gaps
// or duplicates, and falls back to the event stream when the socket cannot
// be opened or the server has too many viewers (see embed.js).
package embedview

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the page, its script and style
	"encoding/base64"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/session"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed embed.js
	script string
	//go:embed embed.css
	style string

	page       = template.Must(template.New("embed").Parse(pageHTML))
	scriptHash = hash(script)
	styleHash  = hash(style)
	errorStyle = "body{font-family:system-ui,sans-serif;margin:2em;color:#555}"
	errorHash  = hash(errorStyle)
	errorPage  = template.Must(template.New("error").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Unavailable</title><style>{{.Style}}</style></head><body><p data-role="error">{{.Message}}</p></body></html>`))
)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Sessions authorizes the page's token (session.Access).
type Sessions interface {
	Authorize(ctx context.Context, id, tok string) (session.Session, error)
}

// Handlers serve the embed view.
type Handlers struct {
	Sessions Sessions
	// AllowedOrigins may frame the page (besides its own origin).
	AllowedOrigins []string
	// UploadOrigin is the object store's origin, which the page PUTs attachments
	// to through presigned URLs.
	UploadOrigin string
	// LiveURL is the viewers' WebSocket URL: an absolute ws:// or wss:// URL,
	// or a path (such as "/@push") the page resolves against its own origin.
	// Empty (or not one of these): no live channel, the page reads the event
	// stream only.
	LiveURL string
	Log     *slog.Logger
}

// Routes is the embed route.
func (h *Handlers) Routes() []httpapi.Route {
	return []httpapi.Route{{Method: http.MethodGet, Pattern: routes.PathEmbed, Handler: h.Page}}
}

type view struct {
	AgentID  string
	Token    string
	LiveURL  template.URL // checked by LiveSource: a ws: or wss: URL, or a path
	Prompt   string
	Features session.Features
	Script   template.JS
	Style    template.CSS
}

// CookieName is the embed view's cookie: the session token, set on the
// page's first load (the embed URL's token) for the path of that agent's
// page only, so that the page reloads without a token in its URL.
const CookieName = "ra_embed"

// cookieMaxAge is how long the browser keeps the cookie: a session's
// longest default life (the token itself stops working when it ends).
const cookieMaxAge = 24 * 60 * 60

// Page serves GET /embed/{id}: with the embed URL's token, or, reloaded
// without it (the page takes it out of the address bar), the token the
// first load set as a cookie.
func (h *Handlers) Page(ctx context.Context, req httpapi.Request) (httpapi.Response, error) {
	id := req.PathParameters["id"]
	tok := req.QueryStringParameters["token"]
	fromURL := tok != ""
	if !fromURL {
		tok = httpapi.Cookie(req, CookieName)
	}
	sess, err := h.Sessions.Authorize(ctx, id, tok)
	if err != nil {
		return h.errorPage(ctx, err), nil
	}
	features := sess.Features
	q := req.QueryStringParameters
	features.FileUpload = features.FileUpload || on(q["file_upload"])
	features.ContextUsage = features.ContextUsage || on(q["context_usage"])
	features.VoiceMic = features.VoiceMic || on(q["voice_mic"])
	css, cssHash := style, styleHash
	if rule, ok := Accent(q["accent"]); ok {
		css += rule
		cssHash = hash(css)
	}
	live, liveSrc := LiveSource(h.LiveURL)
	if h.LiveURL != "" && live == "" && h.Log != nil {
		h.Log.WarnContext(ctx, "embed page: the live URL is not a ws:// or wss:// URL or a path; the page reads the event stream only", slog.String("live_url", h.LiveURL))
	}
	liveAttr := template.URL(live) //nolint:gosec // checked by LiveSource: a ws: or wss: URL of a plain host, or a same-origin path
	var buf bytes.Buffer
	if err := page.Execute(&buf, view{AgentID: sess.ID, Token: tok, LiveURL: liveAttr, Prompt: sess.InitialPrompt, Features: features,
		Script: template.JS(script), Style: template.CSS(css)}); err != nil { //nolint:gosec // constant script; the style is constant but for a checked colour; both allowed by hash
		return h.errorPage(ctx, err), nil
	}
	res := h.html(http.StatusOK, buf.String(), scriptHash, cssHash, liveSrc)
	if fromURL {
		// HttpOnly (the page's scripts get the token in the page), Secure
		// and SameSite=None (the page is framed by other sites), Partitioned
		// (a framing site's own jar, where third-party cookies are blocked).
		cookie := &http.Cookie{Name: CookieName, Value: tok, Path: "/embed/" + sess.ID, MaxAge: cookieMaxAge, //nolint:gosec // SameSite=None on purpose: the page is framed by the app's site; Secure, HttpOnly and Partitioned are set
			HttpOnly: true, Secure: true, SameSite: http.SameSiteNoneMode, Partitioned: true}
		res.Cookies = []string{cookie.String()}
	}
	return res, nil
}

// liveHost is the host (and port) of an absolute live URL as a CSP source
// may name it: a DNS name or an IPv4 address, nothing that could end the
// source or the directive.
var liveHost = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?$`)

// LiveSource checks a live URL (Handlers.LiveURL) and returns it as the page
// gets it, with the source the page's connect-src must allow for it: for an
// absolute ws:// or wss:// URL its origin, for a path (one "/", not "//")
// 'self', which admits the page's own origin's ws: and wss: URLs. Anything
// else is no live URL: both are empty.
func LiveSource(live string) (pageURL, source string) {
	if live == "" {
		return "", ""
	}
	if strings.HasPrefix(live, "/") {
		// A browser reads "//", "/\" and a path with a tab or a line break
		// in it (which its URL parser drops) as another host.
		if strings.HasPrefix(live, "//") || strings.IndexFunc(live, func(r rune) bool { return r == '\\' || r <= ' ' || r == 0x7f }) >= 0 {
			return "", ""
		}
		return live, "'self'"
	}
	u, err := url.Parse(live)
	if err != nil || u.User != nil || u.Opaque != "" || !liveHost.MatchString(u.Host) {
		return "", ""
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "ws" && scheme != "wss" {
		return "", ""
	}
	return live, scheme + "://" + strings.ToLower(u.Host)
}

var hexColour = regexp.MustCompile(`^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// Accent reads the accent URL parameter, a hex colour (#rgb or #rrggbb), and
// returns the CSS rule that sets it, with a text colour that reads on it
// (black or white, whichever contrasts more). Anything else is not a colour:
// ok is false and the page keeps its default.
func Accent(v string) (rule string, ok bool) {
	if !hexColour.MatchString(v) {
		return "", false
	}
	hex := strings.ToLower(v[1:])
	if len(hex) == 3 {
		hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
	}
	rgb, _ := strconv.ParseUint(hex, 16, 32)
	on := "#fff"
	if luminance(rgb) > 0.179 { // where black's contrast passes white's
		on = "#000"
	}
	return ":root{--accent:#" + hex + ";--on-accent:" + on + "}", true
}

// luminance is a 0xrrggbb colour's relative luminance (WCAG 2).
func luminance(rgb uint64) float64 {
	lin := func(c uint64) float64 {
		v := float64(c) / 255
		if v <= 0.04045 {
			return v / 12.92
		}
		return math.Pow((v+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(rgb>>16&0xff) + 0.7152*lin(rgb>>8&0xff) + 0.0722*lin(rgb&0xff)
}

// on reads a feature flag URL parameter: 1 or true (any case).
func on(v string) bool {
	return v == "1" || strings.EqualFold(v, "true")
}

func (h *Handlers) errorPage(ctx context.Context, err error) httpapi.Response {
	env := httpapi.EnvelopeOf(err)
	if httpapi.Internal(err) && h.Log != nil {
		h.Log.ErrorContext(ctx, "embed page", slog.String("error", err.Error()))
	}
	msg := "This agent is not available."
	switch env.ErrorCode {
	case apierror.MissingToken, apierror.InvalidToken:
		msg = "This link is not valid: ask for a new one."
	case apierror.AgentNotFound:
		msg = "This agent does not exist."
	case apierror.ServiceUnavailable:
		msg = "This agent cannot be reached right now: reload the page in a moment."
	}
	var buf bytes.Buffer
	_ = errorPage.Execute(&buf, struct {
		Message string
		Style   template.CSS
	}{msg, template.CSS(errorStyle)}) //nolint:gosec // a constant style, allowed by hash
	res := h.html(env.Status, buf.String(), "", errorHash, "")
	if env.RetryAfterSeconds > 0 {
		res.Headers["Retry-After"] = strconv.Itoa(env.RetryAfterSeconds)
	}
	return res
}

// html answers a page with the headers an iframe embed needs; liveSrc is
// the live channel's source (LiveSource), which the page may connect to.
func (h *Handlers) html(status int, body, scriptSrc, styleSrc, liveSrc string) httpapi.Response {
	if scriptSrc == "" {
		scriptSrc = "'none'"
	}
	ancestors := append([]string{"'self'"}, h.AllowedOrigins...)
	connect := "'self'"
	if h.UploadOrigin != "" {
		connect += " " + h.UploadOrigin
	}
	if liveSrc != "" && liveSrc != "'self'" {
		connect += " " + liveSrc
	}
	csp := strings.Join([]string{
		"default-src 'none'",
		"script-src " + scriptSrc,
		"style-src " + styleSrc,
		"connect-src " + connect,
		"img-src 'self' data:",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors " + strings.Join(ancestors, " "),
	}, "; ")
	return httpapi.Response{StatusCode: status, Body: body, Headers: map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": csp,
		"Referrer-Policy":         "no-referrer",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
		"Permissions-Policy":      "microphone=(self), camera=(), geolocation=()",
	}}
}
