// Package egresstrust makes a sandbox that goes out through the egress
// proxy trust its proxy's certificate authority, where its launcher could
// not hand it a file (a Fargate task is told its proxy, HTTPS_PROXY, and
// nothing else): it asks the proxy for its authority
// (sandboxwire.EgressCAURL, answered for this sandbox alone), writes it
// after the system's certificates in a file its commands can read, and
// names that file in the variables programs read (SSL_CERT_FILE…).
package egresstrust

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// SystemRoots is the system's certificates in the image (Debian's, and
// Alpine's).
const SystemRoots = "/etc/ssl/certs/ca-certificates.crt"

// maxCA bounds the authority's answer.
const maxCA = 64 << 10

// Trust returns environ with the variables that make programs trust the
// sandbox's proxy's authority, its bundle written under dir; environ as it
// is when the sandbox goes through no proxy (HTTPS_PROXY unset) or its
// launcher set them already (SSL_CERT_FILE). It sets the same in the
// process's own environment, for the agent's own requests.
func Trust(ctx context.Context, environ []string, dir string) ([]string, error) {
	get := func(name string) string {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
	proxy := get("HTTPS_PROXY")
	if proxy == "" || get("SSL_CERT_FILE") != "" {
		return environ, nil
	}
	proxyURL, err := url.Parse(proxy)
	if err != nil {
		return environ, fmt.Errorf("egress trust: HTTPS_PROXY: %w", err)
	}
	ca, err := fetch(ctx, proxyURL)
	if err != nil {
		return environ, err
	}
	system, err := os.ReadFile(SystemRoots)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return environ, fmt.Errorf("egress trust: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // certificates, for the tools to read
		return environ, fmt.Errorf("egress trust: %w", err)
	}
	bundle, caFile := filepath.Join(dir, sandboxwire.TrustBundleFile), filepath.Join(dir, sandboxwire.TrustCAFile)
	if err := os.WriteFile(bundle, append(append(system, '\n'), ca...), 0o644); err != nil { //nolint:gosec // certificates
		return environ, fmt.Errorf("egress trust: %w", err)
	}
	if err := os.WriteFile(caFile, ca, 0o644); err != nil { //nolint:gosec // a certificate
		return environ, fmt.Errorf("egress trust: %w", err)
	}
	added := sandboxwire.TrustEnv(bundle, caFile)
	for _, kv := range added {
		name, v, _ := strings.Cut(kv, "=")
		_ = os.Setenv(name, v)
	}
	return append(environ, added...), nil
}

// fetch asks the proxy for the sandbox's authority, a few times: the proxy
// may not know the sandbox for a few seconds after it starts.
func fetch(ctx context.Context, proxy *url.URL) ([]byte, error) {
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}, Timeout: 10 * time.Second}
	var last error
	for wait := 500 * time.Millisecond; wait < 10*time.Second; wait *= 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, sandboxwire.EgressCAURL, nil)
		if err != nil {
			return nil, err
		}
		res, err := client.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(io.LimitReader(res.Body, maxCA))
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK && rerr == nil && strings.Contains(string(body), "BEGIN CERTIFICATE") {
				return body, nil
			}
			err = fmt.Errorf("%s: %s", res.Status, strings.TrimSpace(string(body)))
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil, fmt.Errorf("egress trust: the proxy's authority: %w", last)
}
