package token_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/token"
)

func TestNewIsRandomTypedAndHashed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		plain, hash := token.New(token.Session)
		if seen[plain] {
			t.Fatal("token repeated")
		}
		seen[plain] = true
		body, ok := strings.CutPrefix(plain, "ras_")
		if !ok {
			t.Fatalf("%q lacks the session prefix", plain)
		}
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil || len(raw) < 32 {
			t.Fatalf("token body carries %d bytes (%v), want >= 32", len(raw), err)
		}
		if hash == plain || strings.Contains(hash, body) || len(hash) != 64 {
			t.Fatalf("hash %q is not a SHA-256 of the token", hash)
		}
		if !token.Match(token.Session, plain, hash) {
			t.Fatal("token does not match its own hash")
		}
	}
}

func TestMatchRefuses(t *testing.T) {
	t.Parallel()
	plain, hash := token.New(token.Session)
	other, _ := token.New(token.Session)
	sandbox, sandboxHash := token.New(token.Sandbox)
	tests := []struct {
		name  string
		kind  token.Kind
		plain string
		hash  string
	}{
		{"other token", token.Session, other, hash},
		{"empty", token.Session, "", hash},
		{"empty hash", token.Session, plain, ""},
		{"sandbox token as session token", token.Session, sandbox, sandboxHash},
		{"session token as sandbox token", token.Sandbox, plain, hash},
		{"hash presented as token", token.Session, hash, hash},
		{"truncated", token.Session, plain[:len(plain)-1], token.Hash(plain[:len(plain)-1])},
		{"bad alphabet", token.Session, "ras_" + strings.Repeat("!", 43), token.Hash("ras_" + strings.Repeat("!", 43))},
	}
	for _, tt := range tests {
		if token.Match(tt.kind, tt.plain, tt.hash) {
			t.Errorf("%s: matched", tt.name)
		}
	}
}

// Check and Match, for any string as any kind: a string passes Check for
// at most one kind, and only as that kind's prefix, "_" and 43 characters
// of unpadded URL-safe base64 (256 bits); Match takes exactly the strings
// that pass Check, against their own hash only, never the hash's own text,
// an empty hash, or another string's hash.
func FuzzCheck(f *testing.F) {
	kinds := []token.Kind{token.Session, token.Sandbox, token.Bootstrap, token.AppKey}
	for _, k := range kinds {
		plain, _ := token.New(k)
		f.Add(plain, "")
		f.Add(string(k)+"_", plain)
	}
	f.Add("ras_"+strings.Repeat("A", 42)+"B", "")
	f.Add("ras_"+strings.Repeat("A", 43)+"=", "")
	f.Add("ras_"+strings.Repeat("+", 43), "")
	f.Add("RAS_"+strings.Repeat("A", 43), "")
	f.Fuzz(func(t *testing.T, s, other string) {
		passed := 0
		for _, k := range kinds {
			err := token.Check(k, s)
			if err != nil {
				if !errors.Is(err, token.ErrMalformed) {
					t.Fatalf("Check(%s, %q) = %v", k, s, err)
				}
				if token.Match(k, s, token.Hash(s)) {
					t.Fatalf("%q matched as %s, which Check refuses", s, k)
				}
				continue
			}
			passed++
			body, ok := strings.CutPrefix(s, string(k)+"_")
			raw, derr := base64.RawURLEncoding.DecodeString(body)
			if !ok || len(body) != 43 || derr != nil || len(raw) != 32 {
				t.Fatalf("Check(%s) accepted %q", k, s)
			}
			h := token.Hash(s)
			if len(h) != 64 || !token.Match(k, s, h) || token.Match(k, s, "") || token.Match(k, s, strings.ToUpper(h)) || token.Match(k, h, h) {
				t.Fatalf("%q (%s) and its hash %s", s, k, h)
			}
			if other != s && token.Match(k, s, token.Hash(other)) {
				t.Fatalf("%q matched the hash of %q", s, other)
			}
		}
		if passed > 1 {
			t.Fatalf("%q passes as %d kinds", s, passed)
		}
	})
}
