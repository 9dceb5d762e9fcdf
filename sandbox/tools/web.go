package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Limits of the web tools.
const (
	maxFetchBytes = 512 * 1024
	maxFetchText  = 64 * 1024
	webTimeout    = 30 * time.Second
)

var (
	scriptOrStyle = regexp.MustCompile(`(?is)<(script|style|noscript)[^>]*>.*?</(script|style|noscript)>`)
	htmlTag       = regexp.MustCompile(`(?s)<[^>]*>`)
	blankLines    = regexp.MustCompile(`\n\s*\n\s*\n+`)
)

// webTools are web_fetch and web_search. With a gateway (the Internet Gateway),
// both go through it; without one, web_fetch goes direct and web_search is not
// available. Either way the policy's allow_domains and rate limits apply; a
// direct fetch also reaches public addresses only (directTransport).
func webTools(p *policy.Policy, o Options) []Tool {
	client := o.HTTPClient
	if client == nil {
		var transport http.RoundTripper // the gateway: the operator's, wherever it is
		if o.WebGateway == "" {
			transport = directTransport(p)
		}
		client = &http.Client{Timeout: webTimeout, Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return p.CheckDomain("web_fetch", req.URL.Hostname()) // a redirect may not leave the allowlist
		}}
	}
	return []Tool{
		{
			Name:        "web_fetch",
			Description: "Fetch a web page or file by URL (http or https, allowed domains only) and return its text.",
			Schema: `{"type":"object","additionalProperties":false,"required":["url"],"properties":{
				"url":{"type":"string","minLength":1,"maxLength":2048}}}`,
			Run: func(ctx context.Context, raw json.RawMessage) (string, error) {
				a, err := decode[struct{ URL string }](raw)
				if err != nil {
					return "", err
				}
				u, err := url.Parse(a.URL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
					return "", fmt.Errorf("%q is not an http(s) URL", a.URL)
				}
				if err := p.CheckDomain("web_fetch", u.Hostname()); err != nil {
					return "", err
				}
				target := u.String()
				if o.WebGateway != "" {
					target = strings.TrimRight(o.WebGateway, "/") + "/fetch?url=" + url.QueryEscape(u.String())
				}
				return get(ctx, client, target, o.WebToken)
			},
		},
		{
			Name:        "web_search",
			Description: "Search the web through the gateway; returns titles, URLs and snippets.",
			Schema: `{"type":"object","additionalProperties":false,"required":["query"],"properties":{
				"query":{"type":"string","minLength":1,"maxLength":500},
				"max_results":{"type":"integer","minimum":1,"maximum":20}}}`,
			Run: func(ctx context.Context, raw json.RawMessage) (string, error) {
				a, err := decode[struct {
					Query      string
					MaxResults int `json:"max_results"`
				}](raw)
				if err != nil {
					return "", err
				}
				if o.WebGateway == "" {
					return "", errors.New("web_search needs the Internet Gateway (web.gateway_url), which is not configured")
				}
				if err := p.CheckQuery("web_search"); err != nil {
					return "", err
				}
				if a.MaxResults == 0 {
					a.MaxResults = 5
				}
				body, _ := json.Marshal(map[string]any{"query": a.Query, "max_results": a.MaxResults})
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.WebGateway, "/")+"/search", bytes.NewReader(body))
				if err != nil {
					return "", err
				}
				req.Header.Set("Content-Type", "application/json")
				if o.WebToken != "" {
					req.Header.Set("Authorization", "Bearer "+o.WebToken)
				}
				res, err := client.Do(req)
				if err != nil {
					return "", fmt.Errorf("search failed: %w", err)
				}
				defer func() { _ = res.Body.Close() }()
				if res.StatusCode != http.StatusOK {
					return "", fmt.Errorf("the gateway answered %s", res.Status)
				}
				var out struct {
					Results []struct{ Title, URL, Snippet string } `json:"results"`
				}
				if err := json.NewDecoder(io.LimitReader(res.Body, maxFetchBytes)).Decode(&out); err != nil {
					return "", fmt.Errorf("unreadable search results: %w", err)
				}
				if len(out.Results) == 0 {
					return "no results", nil
				}
				var b strings.Builder
				for i, r := range out.Results {
					fmt.Fprintf(&b, "%d. %s\n   %s\n   %s\n", i+1, r.Title, r.URL, r.Snippet)
				}
				return b.String(), nil
			},
		},
	}
}

// directTransport is the transport of a direct fetch (no gateway). It
// connects to public addresses only, checked where the connection is made,
// after the name resolved and for every address tried, redirects included:
// an internal address (sandboxwire.InternalAddress: loopback, private,
// link-local, the cloud's metadata service…) is refused unless the policy's
// allow_domains of web_fetch names that address itself. No proxy: a sandbox
// is given none.
func directTransport(p *policy.Policy) *http.Transport {
	d := &net.Dialer{Timeout: webTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: web_fetch: %q is not an address", policy.ErrDenied, address)
		}
		if ip := ap.Addr().Unmap(); sandboxwire.InternalAddress(ip) && !p.NamesAddress("web_fetch", ip) {
			return fmt.Errorf("%w: web_fetch: %s is an internal address (loopback, private, link-local or metadata), which allow_domains does not name", policy.ErrDenied, ip)
		}
		return nil
	}}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = d.DialContext
	return t
}

func get(ctx context.Context, client *http.Client, target, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("User-Agent", "remote-agents-agent/1")
	res, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch failed: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxFetchBytes+1))
	if err != nil {
		return "", fmt.Errorf("fetch failed: %w", err)
	}
	truncated := len(body) > maxFetchBytes
	if truncated {
		body = body[:maxFetchBytes]
	}
	if res.StatusCode >= 400 {
		return "", fmt.Errorf("the server answered %s", res.Status)
	}
	if !isText(body) {
		return "", fmt.Errorf("the response is not text (%s)", res.Header.Get("Content-Type"))
	}
	text := string(body)
	if strings.Contains(res.Header.Get("Content-Type"), "html") {
		text = scriptOrStyle.ReplaceAllString(text, "")
		text = html.UnescapeString(htmlTag.ReplaceAllString(text, "\n"))
		text = blankLines.ReplaceAllString(strings.TrimSpace(text), "\n\n")
	}
	if len(text) > maxFetchText {
		text, truncated = text[:maxFetchText], true
	}
	if truncated {
		text += "\n… (truncated)"
	}
	return fmt.Sprintf("%s (%s)\n\n%s", res.Request.URL.Redacted(), res.Status, text), nil
}
