package systemtest_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/remote-agents/remote-agents/api"
)

// The dev server serves the API's OpenAPI document at /openapi.json, the
// one shipped as api/openapi.json.
func TestServesTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	s := start(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.URL+"/openapi.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !bytes.Equal(raw, api.OpenAPI()) {
		t.Error("/openapi.json is not api/openapi.json")
	}
}
