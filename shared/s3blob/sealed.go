package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/remote-agents/remote-agents/shared/blob"
)

var _ blob.Sealed = (*Store)(nil)

// SealedEncryption is the server-side encryption every sealed document is
// written with (SSE-S3), whatever the bucket's default; the stack's bucket
// policy refuses sealed writes without it.
const SealedEncryption = types.ServerSideEncryptionAes256

// ReadSealed returns the document under key and its ETag as its version.
func (s *Store) ReadSealed(ctx context.Context, key string, limit int64) ([]byte, string, error) {
	r, obj, err := s.Get(ctx, key)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s from %s: %w", key, s.bucket, err)
	}
	if int64(len(data)) > limit {
		return nil, "", fmt.Errorf("read %s from %s: larger than %d bytes", key, s.bucket, limit)
	}
	return data, obj.ETag, nil
}

// WriteSealed puts the document with SSE-S3, conditional on its ETag (If-Match)
// or on its absence (If-None-Match: *).
func (s *Store) WriteSealed(ctx context.Context, key string, data []byte, version string) error {
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	in := &s3.PutObjectInput{
		Bucket:               &s.bucket,
		Key:                  &key,
		Body:                 bytes.NewReader(data),
		ContentLength:        aws.Int64(int64(len(data))),
		ContentType:          aws.String("application/json"),
		ServerSideEncryption: SealedEncryption,
	}
	if version == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = &version
	}
	if _, err := s.api.PutObject(ctx, in); err != nil {
		if changed(err) {
			return fmt.Errorf("put %s in %s: %w", key, s.bucket, blob.ErrChanged)
		}
		return fmt.Errorf("put %s in %s: %w", key, s.bucket, err)
	}
	return nil
}

// changed reports a failed write condition: 412, or 409 when S3 saw a
// concurrent conditional write to the same key.
func changed(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "PreconditionFailed" || api.ErrorCode() == "ConditionalRequestConflict")
}
