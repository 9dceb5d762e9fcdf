// Package token makes and checks the system's bearer tokens: opaque random strings
// of 256 bits, typed by a prefix, stored only as SHA-256 hashes and compared in
// constant time. A token encodes nothing: no id, key or host can be read from it.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Kind is the type of a token, written as its prefix. Kinds are never
// interchangeable: a token of one kind never passes as another.
type Kind string

// The kinds of token.
const (
	Session Kind = "ras" // apps and browsers, one session
	Sandbox Kind = "rsb" // the sandbox of one session
	// Bootstrap is the one-time code a launcher gives a sandbox, which the
	// sandbox exchanges once for its sandbox token.
	Bootstrap Kind = "rbc"
	AppKey    Kind = "rak" // an app creating sessions
)

// entropyBytes is 256 bits.
const entropyBytes = 32

var encodedLen = base64.RawURLEncoding.EncodedLen(entropyBytes)

// ErrMalformed: the string is not a token of the wanted kind.
var ErrMalformed = errors.New("malformed token")

// New returns a fresh token of kind and its hash, the only form to store.
func New(kind Kind) (plain, hash string) {
	b := make([]byte, entropyBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	plain = string(kind) + "_" + base64.RawURLEncoding.EncodeToString(b)
	return plain, Hash(plain)
}

// Hash returns the hex SHA-256 of a token. Tokens carry 256 random bits, so a fast
// unsalted hash is enough to make the stored form useless to a reader.
func Hash(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// Check returns ErrMalformed unless plain is shaped like a token of kind. It looks
// at the shape only; Match decides whether it is the right one.
func Check(kind Kind, plain string) error {
	body, ok := strings.CutPrefix(plain, string(kind)+"_")
	if !ok || len(body) != encodedLen {
		return ErrMalformed
	}
	// The decoder skips CR and LF: the length of what it decodes is checked too.
	if raw, err := base64.RawURLEncoding.DecodeString(body); err != nil || len(raw) != entropyBytes {
		return ErrMalformed
	}
	return nil
}

// Match reports, in constant time, whether plain is a token of kind whose hash is
// storedHash.
func Match(kind Kind, plain, storedHash string) bool {
	if Check(kind, plain) != nil || storedHash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(Hash(plain)), []byte(storedHash)) == 1
}
