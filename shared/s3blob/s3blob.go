// Package s3blob implements blob.Store on one Amazon S3 bucket.
package s3blob

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/blob"
)

// API is the part of the S3 client the adapter calls; *s3.Client has it.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	CopyObject(ctx context.Context, in *s3.CopyObjectInput, opts ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// Presigner is the part of s3.PresignClient the adapter calls.
type Presigner interface {
	PresignGetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
	PresignPutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

var (
	_ API        = (*s3.Client)(nil)
	_ Presigner  = (*s3.PresignClient)(nil)
	_ blob.Store = (*Store)(nil)
)

// maxKeyBytes is S3's limit on a key.
const maxKeyBytes = 1024

// Store is one bucket.
type Store struct {
	api     API
	presign Presigner
	bucket  string
}

// New returns the bucket called bucket, reached through client.
func New(client *s3.Client, bucket string) *Store {
	return NewWith(client, s3.NewPresignClient(client), bucket)
}

// NewWith returns the bucket reached through api and presigner (for tests).
func NewWith(api API, presigner Presigner, bucket string) *Store {
	return &Store{api: api, presign: presigner, bucket: bucket}
}

// Put stores an object.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &key,
		Body:          r,
		ContentLength: aws.Int64(size),
	}
	if contentType != "" {
		in.ContentType = &contentType
	}
	if _, err := s.api.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put %s in %s: %w", key, s.bucket, awserr.Classify(err))
	}
	return nil
}

// Get opens an object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, blob.Object, error) {
	if err := ValidKey(key); err != nil {
		return nil, blob.Object{}, fmt.Errorf("get %s: %w", key, err)
	}
	res, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		if isNotFound(err) {
			return nil, blob.Object{}, fmt.Errorf("get %s from %s: %w", key, s.bucket, blob.ErrNotFound)
		}
		return nil, blob.Object{}, fmt.Errorf("get %s from %s: %w", key, s.bucket, awserr.Classify(err))
	}
	return res.Body, blob.Object{
		Key:         key,
		Size:        aws.ToInt64(res.ContentLength),
		ContentType: aws.ToString(res.ContentType),
		ETag:        aws.ToString(res.ETag),
		Modified:    aws.ToTime(res.LastModified),
	}, nil
}

// Copy copies the object under src to dst, within the bucket (objects up to 5 GB).
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	if err := ValidKey(src); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := ValidKey(dst); err != nil {
		return fmt.Errorf("copy to %s: %w", dst, err)
	}
	source := s.bucket + "/" + url.PathEscape(src)
	source = strings.ReplaceAll(source, "%2F", "/")
	if _, err := s.api.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dst, CopySource: &source}); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("copy %s in %s: %w", src, s.bucket, blob.ErrNotFound)
		}
		return fmt.Errorf("copy %s to %s in %s: %w", src, dst, s.bucket, awserr.Classify(err))
	}
	return nil
}

// List lists objects by prefix, one page at a time.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) (blob.Page, error) {
	switch {
	case limit == 0:
		limit = blob.DefaultListSize
	case limit < 0 || limit > blob.MaxListSize:
		return blob.Page{}, fmt.Errorf("list %s: limit %d outside 1..%d", prefix, limit, blob.MaxListSize)
	}
	in := &s3.ListObjectsV2Input{
		Bucket:  &s.bucket,
		Prefix:  &prefix,
		MaxKeys: aws.Int32(int32(limit)),
	}
	if after != "" {
		in.ContinuationToken = &after
	}
	return s.list(ctx, in)
}

// ListAfter is List by key: up to limit objects whose keys start with
// prefix and come after the key startAfter ("": from the first). A page's
// Next is its last key when more may follow.
func (s *Store) ListAfter(ctx context.Context, prefix, startAfter string, limit int) (blob.Page, error) {
	switch {
	case limit == 0:
		limit = blob.DefaultListSize
	case limit < 0 || limit > blob.MaxListSize:
		return blob.Page{}, fmt.Errorf("list %s: limit %d outside 1..%d", prefix, limit, blob.MaxListSize)
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, MaxKeys: aws.Int32(int32(limit))}
	if startAfter != "" {
		in.StartAfter = &startAfter
	}
	page, err := s.list(ctx, in)
	if err == nil && page.Next != "" && len(page.Objects) > 0 {
		page.Next = page.Objects[len(page.Objects)-1].Key
	}
	return page, err
}

// list runs one ListObjectsV2.
func (s *Store) list(ctx context.Context, in *s3.ListObjectsV2Input) (blob.Page, error) {
	prefix := aws.ToString(in.Prefix)
	res, err := s.api.ListObjectsV2(ctx, in)
	if err != nil {
		return blob.Page{}, fmt.Errorf("list %s in %s: %w", prefix, s.bucket, awserr.Classify(err))
	}
	page := blob.Page{Objects: make([]blob.Object, 0, len(res.Contents))}
	for _, o := range res.Contents {
		page.Objects = append(page.Objects, blob.Object{
			Key:      aws.ToString(o.Key),
			Size:     aws.ToInt64(o.Size),
			ETag:     aws.ToString(o.ETag),
			Modified: aws.ToTime(o.LastModified),
		})
	}
	if aws.ToBool(res.IsTruncated) {
		page.Next = aws.ToString(res.NextContinuationToken)
	}
	return page, nil
}

// PresignGet returns a URL that downloads key until ttl passes.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := checkPresign(key, ttl); err != nil {
		return "", fmt.Errorf("presign get %s: %w", key, err)
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign get %s in %s: %w", key, s.bucket, err)
	}
	return req.URL, nil
}

// PresignPut returns a request that uploads exactly size bytes of contentType
// under key until ttl passes. The length and type are signed headers, so S3
// refuses a body of another length (403 SignatureDoesNotMatch). S3 signs no
// length of zero: an empty upload signs the digest of an empty body instead,
// which S3 checks against what it receives (400 BadDigest).
func (s *Store) PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (blob.Presigned, error) {
	if err := checkPresign(key, ttl); err != nil {
		return blob.Presigned{}, fmt.Errorf("presign put %s: %w", key, err)
	}
	if size < 0 || size > MaxPutBytes {
		return blob.Presigned{}, fmt.Errorf("presign put %s: size %d outside 0..%d", key, size, int64(MaxPutBytes))
	}
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, ContentLength: aws.Int64(size)}
	if contentType != "" {
		in.ContentType = &contentType
	}
	if size == 0 {
		in.ContentMD5 = aws.String(emptyMD5)
	}
	req, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return blob.Presigned{}, fmt.Errorf("presign put %s in %s: %w", key, s.bucket, err)
	}
	headers := make(map[string]string, len(req.SignedHeader))
	for k, v := range req.SignedHeader {
		if k != "Host" { // the client's own, from the URL
			headers[k] = strings.Join(v, ",")
		}
	}
	if size > 0 && headers["Content-Length"] != strconv.FormatInt(size, 10) {
		// Unsigned, the length would be the client's to choose: refuse to hand
		// out such a URL rather than hand out an unbounded one.
		return blob.Presigned{}, fmt.Errorf("presign put %s: the length is not signed", key)
	}
	if _, ok := headers["Content-Type"]; !ok && contentType != "" {
		headers["Content-Type"] = contentType // stored with the object, though unsigned
	}
	return blob.Presigned{URL: req.URL, Headers: headers}, nil
}

// PresignPutSHA256 is PresignPut for bytes whose SHA-256 is sum (32 bytes):
// the checksum is a signed header too, so S3 refuses any other bytes (400
// BadDigest) and keeps the checksum with the object (StoredSHA256).
func (s *Store) PresignPutSHA256(ctx context.Context, key string, size int64, sum []byte, ttl time.Duration) (blob.Presigned, error) {
	if err := checkPresign(key, ttl); err != nil {
		return blob.Presigned{}, fmt.Errorf("presign put %s: %w", key, err)
	}
	if size < 0 || size > MaxPutBytes || len(sum) != sha256.Size {
		return blob.Presigned{}, fmt.Errorf("presign put %s: size %d outside 0..%d, or a checksum of %d bytes", key, size, int64(MaxPutBytes), len(sum))
	}
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, ContentLength: aws.Int64(size),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum))}
	req, err := s.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return blob.Presigned{}, fmt.Errorf("presign put %s in %s: %w", key, s.bucket, err)
	}
	headers := make(map[string]string, len(req.SignedHeader))
	for k, v := range req.SignedHeader {
		if k != "Host" {
			headers[k] = strings.Join(v, ",")
		}
	}
	if size > 0 && headers["Content-Length"] != strconv.FormatInt(size, 10) {
		return blob.Presigned{}, fmt.Errorf("presign put %s: the length is not signed", key)
	}
	return blob.Presigned{URL: req.URL, Headers: headers}, nil
}

// StoredSHA256 returns the SHA-256 S3 keeps with the object under key (one
// written with its checksum, PresignPutSHA256) and its size; a nil sum
// where the store keeps none (an emulator). blob.ErrNotFound if absent.
func (s *Store) StoredSHA256(ctx context.Context, key string) (sum []byte, size int64, err error) {
	if err := ValidKey(key); err != nil {
		return nil, 0, fmt.Errorf("head %s: %w", key, err)
	}
	res, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		if isNotFound(err) {
			return nil, 0, fmt.Errorf("head %s in %s: %w", key, s.bucket, blob.ErrNotFound)
		}
		return nil, 0, fmt.Errorf("head %s in %s: %w", key, s.bucket, awserr.Classify(err))
	}
	if c := aws.ToString(res.ChecksumSHA256); c != "" && !strings.Contains(c, "-") { // not a multipart composite
		if sum, err = base64.StdEncoding.DecodeString(c); err != nil || len(sum) != sha256.Size {
			sum = nil
		}
	}
	return sum, aws.ToInt64(res.ContentLength), nil
}

// DeletePrefix deletes every object whose key starts with prefix (at
// least one segment: "a/"), a page at a time.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	if !strings.HasSuffix(prefix, "/") || ValidKey(strings.TrimSuffix(prefix, "/")) != nil {
		return fmt.Errorf("delete %q: not a folder prefix", prefix)
	}
	for {
		page, err := s.List(ctx, prefix, "", blob.MaxListSize)
		if err != nil {
			return err
		}
		if len(page.Objects) == 0 {
			return nil
		}
		keys := make([]string, 0, len(page.Objects))
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if err := s.Delete(ctx, keys...); err != nil {
			return err
		}
	}
}

// Delete deletes the objects keys (those that are not there are no
// error), blob.MaxListSize to a request.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	for batch := range slices.Chunk(keys, blob.MaxListSize) {
		ids := make([]types.ObjectIdentifier, 0, len(batch))
		for _, k := range batch {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := s.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return fmt.Errorf("delete %d objects in %s: %w", len(batch), s.bucket, awserr.Classify(err))
		}
		if len(out.Errors) > 0 {
			return fmt.Errorf("delete %s in %s: %s", aws.ToString(out.Errors[0].Key), s.bucket, aws.ToString(out.Errors[0].Message))
		}
	}
	return nil
}

// MaxPutBytes is S3's limit on one PUT (5 GiB).
const MaxPutBytes = 5 << 30

// emptyMD5 is the Content-MD5 of an empty body.
const emptyMD5 = "1B2M2Y8AsgTpgAmY7PhCfg=="

func checkPresign(key string, ttl time.Duration) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	if ttl <= 0 || ttl > blob.MaxPresignTTL {
		return fmt.Errorf("ttl %s outside (0, %s]", ttl, blob.MaxPresignTTL)
	}
	return nil
}

// ValidKey accepts keys the system builds: UTF-8, 1..1024 bytes, relative, no empty,
// "." or ".." segments and no control characters.
func ValidKey(key string) error {
	if key == "" || len(key) > maxKeyBytes || !utf8.ValidString(key) {
		return fmt.Errorf("invalid key %q: want 1..%d bytes of UTF-8", key, maxKeyBytes)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid key %q: empty, '.' or '..' segment", key)
		}
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("invalid key %q: control character", key)
		}
	}
	return nil
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
}
