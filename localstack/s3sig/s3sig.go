// Package s3sig checks presigned S3 requests as S3 does, for the local S3
// emulator, which checks no signature: a presigned URL (SigV4 in the query)
// must be signed with the emulators' credentials, unexpired, and its signature
// must match the request received, over the headers the URL names as signed.
// So a PUT whose body is not the length, or whose type is not the type, that
// a URL was presigned for is refused here as S3 refuses it (403
// SignatureDoesNotMatch), and tests and local runs see uploads bounded as they
// are in AWS. Requests signed in the Authorization header (the SDK's own
// calls) pass unchecked.
package s3sig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Checker checks presigned requests signed with one access key.
type Checker struct {
	AccessKeyID     string
	SecretAccessKey string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Error is S3's answer to a request it refuses.
type Error struct {
	Status  int    `xml:"-"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Front serves next behind the check: a presigned request that fails it gets
// S3's XML error instead.
func (c Checker) Front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := c.Check(r); err != nil {
			body, _ := xml.Marshal(struct {
				XMLName xml.Name `xml:"Error"`
				*Error
			}{Error: err})
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(err.Status)
			_, _ = w.Write(append([]byte(xml.Header), body...))
			return
		}
		next.ServeHTTP(w, r)
	})
}

const (
	algorithm   = "AWS4-HMAC-SHA256"
	dateFormat  = "20060102T150405Z"
	unsigned    = "UNSIGNED-PAYLOAD"
	maxLifetime = 7 * 24 * time.Hour
)

// Check returns nil for a request that is not presigned or whose presigned
// signature holds, and S3's error otherwise. A CORS preflight (OPTIONS) is
// answered by the bucket's CORS rules, never signed: it passes.
func (c Checker) Check(r *http.Request) *Error {
	q := r.URL.Query()
	if !q.Has("X-Amz-Signature") || r.Method == http.MethodOptions {
		return nil
	}
	malformed := func(msg string) *Error {
		return &Error{Status: http.StatusBadRequest, Code: "AuthorizationQueryParametersError", Message: msg}
	}
	if q.Get("X-Amz-Algorithm") != algorithm {
		return malformed("X-Amz-Algorithm only supports " + algorithm)
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/") // key/date/region/service/aws4_request
	if len(cred) != 5 || cred[3] != "s3" || cred[4] != "aws4_request" {
		return malformed("X-Amz-Credential is malformed")
	}
	if cred[0] != c.AccessKeyID {
		return &Error{Status: http.StatusForbidden, Code: "InvalidAccessKeyId", Message: "The AWS Access Key Id you provided does not exist in our records."}
	}
	amzDate := q.Get("X-Amz-Date")
	signedAt, err := time.Parse(dateFormat, amzDate)
	if err != nil || !strings.HasPrefix(amzDate, cred[1]) {
		return malformed("X-Amz-Date must be in the ISO8601 Long Format and match the credential's date")
	}
	seconds, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || seconds < 1 || time.Duration(seconds)*time.Second > maxLifetime {
		return malformed("X-Amz-Expires must be 1 to 604800 seconds")
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if now().After(signedAt.Add(time.Duration(seconds) * time.Second)) {
		return &Error{Status: http.StatusForbidden, Code: "AccessDenied", Message: "Request has expired"}
	}
	signedHeaders := q.Get("X-Amz-SignedHeaders")
	names := strings.Split(signedHeaders, ";")
	if !slices.Contains(names, "host") || !slices.IsSorted(names) {
		return malformed("X-Amz-SignedHeaders must be sorted and include host")
	}
	canonical := strings.Join([]string{
		r.Method,
		escape(r.URL.Path, false),
		canonicalQuery(r),
		canonicalHeaders(r, names),
		signedHeaders,
		unsigned,
	}, "\n")
	sum := sha256.Sum256([]byte(canonical))
	toSign := strings.Join([]string{algorithm, amzDate, strings.Join(cred[1:], "/"), hex.EncodeToString(sum[:])}, "\n")
	key := []byte("AWS4" + c.SecretAccessKey)
	for _, part := range cred[1:] {
		key = mac(key, part)
	}
	want := hex.EncodeToString(mac(key, toSign))
	if !hmac.Equal([]byte(want), []byte(q.Get("X-Amz-Signature"))) {
		return &Error{Status: http.StatusForbidden, Code: "SignatureDoesNotMatch",
			Message: "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	}
	return nil
}

// canonicalQuery is the query without the signature, sorted, each key and
// value URI-encoded.
func canonicalQuery(r *http.Request) string {
	q := r.URL.Query()
	q.Del("X-Amz-Signature")
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, escape(k, true)+"="+escape(v, true))
		}
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "&")
}

// canonicalHeaders lists the signed headers as received, "name:value\n" each;
// an absent one (a chunked body's Content-Length) is empty, and so fails.
func canonicalHeaders(r *http.Request, names []string) string {
	var b strings.Builder
	for _, name := range names {
		value := strings.Join(r.Header.Values(name), ",")
		if name == "host" {
			value = r.Host
		}
		b.WriteString(name + ":" + strings.Join(strings.Fields(value), " ") + "\n")
	}
	return b.String()
}

// escape URI-encodes s as SigV4 does: every byte but A-Z a-z 0-9 - _ . ~
// (and '/' in a path).
func escape(s string, slash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~', c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func mac(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
