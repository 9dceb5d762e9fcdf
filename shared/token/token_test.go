package token_test

import (
	"encoding/base64"
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

func FuzzCheck(f *testing.F) {
	plain, _ := token.New(token.AppKey)
	f.Add(plain)
	f.Add("rak_")
	f.Fuzz(func(t *testing.T, s string) {
		if token.Check(token.AppKey, s) == nil && (!strings.HasPrefix(s, "rak_") || len(s) != len(plain)) {
			t.Fatalf("accepted %q", s)
		}
	})
}
