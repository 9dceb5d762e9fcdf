package s3blob_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/s3blob"
)

// Sealed documents are written with server-side encryption, and replaced only
// from the version read: a write from a stale read is ErrChanged.
func TestSealedDocuments(t *testing.T) {
	t.Parallel()
	set, _ := awstest.Resources(t)
	client := awsconfig.NewS3(awstest.Config(t))
	s := s3blob.New(client, set.Bucket.Name)
	ctx := t.Context()
	const key = "configurations/cfg-1/env.json"

	if _, _, err := s.ReadSealed(ctx, key, 1024); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("absent: %v, want ErrNotFound", err)
	}
	if err := s.WriteSealed(ctx, key, []byte(`{"A":"1"}`), ""); err != nil {
		t.Fatal(err)
	}
	// Created only if absent: a second creator lost the race.
	if err := s.WriteSealed(ctx, key, []byte(`{"B":"2"}`), ""); !errors.Is(err, blob.ErrChanged) {
		t.Errorf("second create: %v, want ErrChanged", err)
	}
	data, v1, err := s.ReadSealed(ctx, key, 1024)
	if err != nil || string(data) != `{"A":"1"}` || v1 == "" {
		t.Fatalf("read %q %q %v", data, v1, err)
	}
	if err := s.WriteSealed(ctx, key, []byte(`{"A":"1","C":"3"}`), v1); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSealed(ctx, key, []byte(`{"A":"lost"}`), v1); !errors.Is(err, blob.ErrChanged) {
		t.Errorf("write from a stale read: %v, want ErrChanged", err)
	}
	if data, _, err := s.ReadSealed(ctx, key, 1024); err != nil || string(data) != `{"A":"1","C":"3"}` {
		t.Errorf("after a stale write: %q %v", data, err)
	}
	if _, _, err := s.ReadSealed(ctx, key, 5); err == nil || !strings.Contains(err.Error(), "larger than 5 bytes") {
		t.Errorf("over the limit: %v", err)
	}

	// Encrypted at rest: S3 reports the encryption it applied.
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(set.Bucket.Name), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	_ = out.Body.Close()
	if out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Errorf("server-side encryption %q, want AES256", out.ServerSideEncryption)
	}
}

// Of concurrent writers from one read, exactly one wins.
func TestSealedWritersRace(t *testing.T) {
	t.Parallel()
	set, _ := awstest.Resources(t)
	s := s3blob.New(awsconfig.NewS3(awstest.Config(t)), set.Bucket.Name)
	ctx := t.Context()
	const key = "configurations/cfg-race/env.json"
	if err := s.WriteSealed(ctx, key, []byte(`{}`), ""); err != nil {
		t.Fatal(err)
	}
	_, v, err := s.ReadSealed(ctx, key, 1024)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.WriteSealed(ctx, key, []byte(`{"W":"`+strings.Repeat("x", i+1)+`"}`), v) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, blob.ErrChanged):
			t.Errorf("a loser: %v, want ErrChanged", err)
		}
	}
	if won != 1 {
		t.Errorf("%d writers won, want 1", won)
	}
}
