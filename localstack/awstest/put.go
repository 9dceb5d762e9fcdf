package awstest

import (
	"io"
	"net/http"
	"testing"
)

// Put sends body to a presigned PUT url with the headers its signature
// covers, and returns the status the object store answered.
func Put(t *testing.T, url string, headers map[string]string, body io.Reader) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}
