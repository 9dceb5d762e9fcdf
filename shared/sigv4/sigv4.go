// Package sigv4 verifies AWS Signature Version 4 signatures on HTTP requests
// (the Authorization header form), as API Gateway's IAM authorization does:
// the canonical request is rebuilt from what arrived (method, path, query,
// the signed headers and the SHA-256 of the body), signed with the secret of
// the key id the request names, and compared in constant time. The dev server
// uses it on the orchestrator's /internal/ routes.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Algorithm is the only signing algorithm accepted.
const Algorithm = "AWS4-HMAC-SHA256"

// MaxSkew is how far a request's X-Amz-Date may be from the verifier's clock.
const MaxSkew = 5 * time.Minute

// Request is what a verifier sees of a request. Headers are keyed by lower-case
// name; Path is the path as sent (escaped), RawQuery the query as sent.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Headers  map[string]string
	Body     []byte
}

// Credentials are one access key a verifier accepts.
type Credentials struct {
	KeyID  string
	Secret string
}

// Verifier checks signatures made for one region and service.
type Verifier struct {
	Region  string
	Service string
	// Keys are the access keys accepted.
	Keys []Credentials
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Errors of Verify (wrapped); every one means the request is refused.
var (
	ErrUnsigned    = errors.New("request is not signed")
	ErrMalformed   = errors.New("malformed signature")
	ErrUnknownKey  = errors.New("unknown access key")
	ErrScope       = errors.New("signature scope is not this region and service")
	ErrExpired     = errors.New("request time is outside the allowed skew")
	ErrSignature   = errors.New("signature does not match")
	errMissingDate = errors.New("no x-amz-date")
)

// authorization is a parsed Authorization header.
type authorization struct {
	keyID, date, region, service string
	signedHeaders                []string
	signature                    []byte
}

// Verify checks req's signature and returns the access key id it was made
// with.
func (v *Verifier) Verify(req Request) (string, error) {
	raw := req.Headers["authorization"]
	if raw == "" {
		return "", ErrUnsigned
	}
	a, err := parseAuthorization(raw)
	if err != nil {
		return "", err
	}
	amzDate := req.Headers["x-amz-date"]
	if amzDate == "" {
		return "", fmt.Errorf("%w: %w", ErrMalformed, errMissingDate)
	}
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, a.date) {
		return "", fmt.Errorf("%w: x-amz-date %q does not match the scope", ErrMalformed, amzDate)
	}
	if a.region != v.Region || a.service != v.Service {
		return "", ErrScope
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if d := now().Sub(at); d > MaxSkew || d < -MaxSkew {
		return "", ErrExpired
	}
	if !slices.Contains(a.signedHeaders, "host") || !slices.Contains(a.signedHeaders, "x-amz-date") {
		return "", fmt.Errorf("%w: host and x-amz-date must be signed", ErrMalformed)
	}
	var secret string
	found := false
	for _, k := range v.Keys {
		if hmac.Equal([]byte(k.KeyID), []byte(a.keyID)) {
			secret, found = k.Secret, true
		}
	}
	if !found {
		return "", ErrUnknownKey
	}
	canonical, err := canonicalRequest(req, a.signedHeaders)
	if err != nil {
		return "", err
	}
	scope := a.date + "/" + a.region + "/" + a.service + "/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := signingKey(secret, a.date, a.region, a.service)
	want := hmacSHA256(key, []byte(toSign))
	if !hmac.Equal(want, a.signature) {
		return "", ErrSignature
	}
	return a.keyID, nil
}

// Unsigned returns those of names (lower case) that a request has, by has,
// but its Authorization header does not sign: all of them when the header
// is not a SigV4 signature. API Gateway verifies a signature over whatever
// headers it signs; a route that trusts other headers checks them with it.
func Unsigned(authorization string, names []string, has func(name string) bool) []string {
	a, err := parseAuthorization(authorization)
	var out []string
	for _, n := range names {
		if has(n) && (err != nil || !slices.Contains(a.signedHeaders, n)) {
			out = append(out, n)
		}
	}
	return out
}

func parseAuthorization(raw string) (authorization, error) {
	var a authorization
	alg, rest, ok := strings.Cut(strings.TrimSpace(raw), " ")
	if !ok || alg != Algorithm {
		return a, fmt.Errorf("%w: algorithm", ErrMalformed)
	}
	parts := map[string]string{}
	for p := range strings.SplitSeq(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return a, fmt.Errorf("%w: authorization field %q", ErrMalformed, p)
		}
		parts[k] = val
	}
	cred := strings.Split(parts["Credential"], "/")
	if len(cred) != 5 || cred[4] != "aws4_request" || cred[0] == "" || len(cred[1]) != 8 {
		return a, fmt.Errorf("%w: credential", ErrMalformed)
	}
	a.keyID, a.date, a.region, a.service = cred[0], cred[1], cred[2], cred[3]
	if parts["SignedHeaders"] == "" {
		return a, fmt.Errorf("%w: signed headers", ErrMalformed)
	}
	a.signedHeaders = strings.Split(parts["SignedHeaders"], ";")
	if !slices.IsSorted(a.signedHeaders) {
		return a, fmt.Errorf("%w: signed headers not sorted", ErrMalformed)
	}
	sig, err := hex.DecodeString(parts["Signature"])
	if err != nil || len(sig) != sha256.Size {
		return a, fmt.Errorf("%w: signature", ErrMalformed)
	}
	a.signature = sig
	return a, nil
}

// canonicalRequest builds the SigV4 canonical request of req.
func canonicalRequest(req Request, signed []string) (string, error) {
	var b strings.Builder
	b.WriteString(req.Method)
	b.WriteByte('\n')
	b.WriteString(escapePath(req.Path))
	b.WriteByte('\n')
	q, err := canonicalQuery(req.RawQuery)
	if err != nil {
		return "", err
	}
	b.WriteString(q)
	b.WriteByte('\n')
	for _, h := range signed {
		val, ok := req.Headers[h]
		if !ok && h == "content-length" {
			val, ok = strconv.Itoa(len(req.Body)), true
		}
		if !ok {
			return "", fmt.Errorf("%w: signed header %s is missing", ErrSignature, h)
		}
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(strings.Join(strings.Fields(val), " "))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	sum := sha256.Sum256(req.Body)
	b.WriteString(hex.EncodeToString(sum[:]))
	return b.String(), nil
}

// canonicalQuery sorts the query's parameters by name, then value, each
// URI-encoded.
func canonicalQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "", fmt.Errorf("%w: query", ErrMalformed)
	}
	var pairs []string
	for k, vs := range vals {
		for _, v := range vs {
			pairs = append(pairs, encode(k, true)+"="+encode(v, true))
		}
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "&"), nil
}

// escapePath URI-encodes every byte of the path but unreserved ones and
// '/' (the path as sent is encoded again, as SigV4 does for every service but
// S3).
func escapePath(p string) string {
	if p == "" {
		return "/"
	}
	return encode(p, false)
}

func encode(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), []byte(date))
	k = hmacSHA256(k, []byte(region))
	k = hmacSHA256(k, []byte(service))
	return hmacSHA256(k, []byte("aws4_request"))
}

func hmacSHA256(key, data []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(data)
	return h.Sum(nil)
}
