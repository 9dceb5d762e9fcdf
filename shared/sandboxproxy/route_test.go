package sandboxproxy

import (
	"net/http/httptest"
	"testing"
)

// A request names its sandbox by headers, else by its host's first label
// (<port>-<id>); anything else is refused.
func TestRoute(t *testing.T) {
	t.Parallel()
	id := "0b7d6c1e-2f4a-4b9c-8d3e-5f6a7b8c9d0e"
	for _, c := range []struct {
		host, headerID, headerPort string
		id                         string
		port                       int
		bad                        bool
	}{
		{host: "127.0.0.1:49983", headerID: id, id: id, port: 49983},
		{host: "127.0.0.1:49983", headerID: id, headerPort: "3000", id: id, port: 3000},
		{host: "127.0.0.1:49983", headerID: id, headerPort: "http", bad: true},
		{host: "49983-" + id + ".sandbox.example.com", id: id, port: 49983},
		{host: "8080-" + id + ".sandbox.example.com:443", id: id, port: 8080},
		{host: "sandbox.example.com", bad: true},
		{host: "x-" + id + ".example.com", bad: true},
		{host: "70000-" + id + ".example.com", bad: true},
	} {
		r := httptest.NewRequest("GET", "/health", nil)
		r.Host = c.host
		if c.headerID != "" {
			r.Header.Set(HeaderSandboxID, c.headerID)
		}
		if c.headerPort != "" {
			r.Header.Set(HeaderSandboxPort, c.headerPort)
		}
		gotID, gotPort, err := route(r)
		if (err != nil) != c.bad || (!c.bad && (gotID != c.id || gotPort != c.port)) {
			t.Errorf("%s %s:%s: %q %d %v", c.host, c.headerID, c.headerPort, gotID, gotPort, err)
		}
	}
}
