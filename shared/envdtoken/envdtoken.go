// Package envdtoken mints and checks the access tokens of sandboxes' envd
// (the E2B SDKs' envdAccessToken, sent as X-Access-Token): a keyed hash of
// the sandbox's id under the platform's token key, so that create and every
// connect can hand the same token out again, and the sandbox proxy can check
// it, with nothing stored. A token lets its holder into that one sandbox
// while it runs; the proxy lets no token into a paused or ended one.
package envdtoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// Prefix starts every envd access token; TrafficPrefix every traffic
// access token (a sandbox's preview URLs only: E2B's trafficAccessToken).
const (
	Prefix        = "ra_envd_"
	TrafficPrefix = "ra_traffic_"
)

// MinKeyBytes is the least a key holds.
const MinKeyBytes = 32

// Key mints and checks tokens. Its replicas (the sandbox API's function, the
// sandbox proxy) must hold the same key.
type Key struct {
	secret []byte
}

// New returns the key of secret (at least MinKeyBytes).
func New(secret []byte) (Key, error) {
	if len(secret) < MinKeyBytes {
		return Key{}, errors.New("envdtoken: the key holds less than 32 bytes")
	}
	return Key{secret: append([]byte(nil), secret...)}, nil
}

// Random returns a key of random bytes: for one process that both mints and
// checks (the dev server).
func Random() Key {
	b := make([]byte, MinKeyBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return Key{secret: b}
}

// Token is the access token of sandbox id.
func (k Key) Token(id string) string {
	return Prefix + base64.RawURLEncoding.EncodeToString(k.mac(id))
}

// Check reports whether tok is the access token of sandbox id, in time
// independent of where they differ.
func (k Key) Check(id, tok string) bool {
	return k.check(Prefix, accessDomain, id, tok)
}

// TrafficToken is the traffic access token of sandbox id: it opens its
// preview URLs, not envd.
func (k Key) TrafficToken(id string) string {
	return TrafficPrefix + base64.RawURLEncoding.EncodeToString(k.macIn(trafficDomain, id))
}

// CheckTraffic reports whether tok is the traffic access token of sandbox
// id, in time independent of where they differ.
func (k Key) CheckTraffic(id, tok string) bool {
	return k.check(TrafficPrefix, trafficDomain, id, tok)
}

// The tokens' domains: one key, a hash apart for each kind.
const (
	accessDomain  = "envd access token v1\x00"
	trafficDomain = "traffic access token v1\x00"
)

func (k Key) check(prefix, domain, id, tok string) bool {
	raw, ok := strings.CutPrefix(tok, prefix)
	if !ok || len(k.secret) == 0 {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(raw)
	return err == nil && hmac.Equal(got, k.macIn(domain, id))
}

func (k Key) mac(id string) []byte { return k.macIn(accessDomain, id) }

func (k Key) macIn(domain, id string) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte(domain + id))
	return m.Sum(nil)
}
