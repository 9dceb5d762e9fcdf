// Package upload sends a sandbox's files to the presigned URLs the platform
// hands out for them (verify's evidence, save_snapshot's archive, a job's
// outputs and log). Standard library only: the agent links it.
package upload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
)

// Put sends the size bytes of body to a presigned PUT url with the headers the
// platform signed into it (the length and type among them: the object store
// refuses a body that is not what the URL was signed for). The request
// carries Content-Length: size, also when size is 0; an empty body sent
// chunked, without a length, is refused by the store. Host and
// Content-Length are the client's own, whatever headers says.
//
// The error of a request the store did not take says why without the URL (it
// holds a signature): the store could not be reached, or the status it
// answered.
func Put(ctx context.Context, client *http.Client, url string, body io.Reader, size int64, headers map[string]string) error {
	if size < 0 {
		return fmt.Errorf("negative size %d", size)
	}
	rd := io.Reader(http.NoBody)
	if size > 0 {
		rd = io.LimitReader(body, size)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, rd)
	if err != nil {
		return fmt.Errorf("the upload request: %w", err)
	}
	// A zero ContentLength with a body other than http.NoBody is an unknown
	// length, which the client sends chunked: hence NoBody above.
	req.ContentLength = size
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return errUnreachable
	}
	defer func() { _ = res.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		return &StatusError{Status: res.StatusCode}
	}
	return nil
}

// errUnreachable is the error of an upload that got no answer. The client's
// own error is left out: it names the URL, signature included.
var errUnreachable = errors.New("the object store could not be reached")

// StatusError is the answer of an object store that did not take an upload.
type StatusError struct {
	// Status is the HTTP status the store answered.
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the object store answered %d", e.Status)
}

// ContentType is the media type an upload of the file called name declares:
// the one its extension says, else application/octet-stream.
func ContentType(name string) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}
