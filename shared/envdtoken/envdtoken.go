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

// Prefix starts every envd access token.
const Prefix = "ra_envd_"

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
	raw, ok := strings.CutPrefix(tok, Prefix)
	if !ok || len(k.secret) == 0 {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(raw)
	return err == nil && hmac.Equal(got, k.mac(id))
}

func (k Key) mac(id string) []byte {
	m := hmac.New(sha256.New, k.secret)
	m.Write([]byte("envd access token v1\x00" + id))
	return m.Sum(nil)
}
