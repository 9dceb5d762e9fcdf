package egressproxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
)

// BenchmarkEgressProxy measures what the proxy adds to one request of a
// sandbox, each on a new connection (as a command's curl makes it): a
// plain HTTP request direct and through the proxy, an HTTPS request direct
// and through a CONNECT tunnel passed through untouched, and through the
// proxy terminating TLS to inject a header, in alternating order. Added is
// the difference with direct, request by request.
func BenchmarkEgressProxy(b *testing.B) {
	up := &upstream{}
	plain := httptest.NewServer(up)
	defer plain.Close()
	secure := httptest.NewTLSServer(up)
	defer secure.Close()
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	f := start(b, roots)
	f.set(Grant{Policy: allow(strings.TrimPrefix(plain.URL, "http://"), strings.TrimPrefix(secure.URL, "https://"))})
	ca, err := f.proxy.CA("sb1")
	if err != nil {
		b.Fatal(err)
	}
	withCA := roots.Clone()
	withCA.AppendCertsFromPEM(ca)
	client := func(proxy *url.URL, roots *x509.CertPool) *http.Client {
		tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots}}
		if proxy != nil {
			tr.Proxy = http.ProxyURL(proxy)
		}
		return &http.Client{Transport: tr}
	}
	direct, proxied, terminated := client(nil, roots), client(f.url, roots), client(f.url, withCA)
	do := func(c *http.Client, u string) time.Duration {
		began := time.Now()
		res, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d", u, res.StatusCode)
		}
		return time.Since(began)
	}
	rec := benchrec.New(b)
	inject := []Injection{{Host: "127.0.0.1", Header: "Authorization", Value: "Bearer bench"}}
	for b.Loop() {
		d := do(direct, plain.URL+"/x")
		p := do(proxied, plain.URL+"/x")
		rec.Add("http direct", d)
		rec.Add("http proxied", p)
		rec.AddMillis("http added", float64(p-d)/float64(time.Millisecond))

		f.set(Grant{Policy: f.grantNow().Policy})
		f.advance(DefaultTTL)
		ds := do(direct, secure.URL+"/x")
		ps := do(proxied, secure.URL+"/x")
		rec.Add("https direct", ds)
		rec.Add("https tunnelled", ps)
		rec.AddMillis("https tunnelled added", float64(ps-ds)/float64(time.Millisecond))

		f.set(Grant{Policy: f.grantNow().Policy, Inject: inject})
		f.advance(DefaultTTL)
		ts := do(terminated, secure.URL+"/x")
		rec.Add("https terminated", ts)
		rec.AddMillis("https terminated added", float64(ts-ds)/float64(time.Millisecond))
	}
	p50 := func(s string) float64 { return rec.Percentile(s, 0.5) }
	if d := p50("https direct"); d > 0 {
		rec.Figure("tunnelled/direct p50 ratio", p50("https tunnelled")/d)
		rec.Figure("terminated/direct p50 ratio", p50("https terminated")/d)
	}
	rec.Done()
}

// grantNow is the grant the fixture answers.
func (f *fixture) grantNow() Grant {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grant
}
