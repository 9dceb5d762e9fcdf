package envd_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// connectTo sends CONNECT host (with the access token unless bare) to envd at
// base and returns the connection and the answer's status.
func connectTo(t *testing.T, base, host string, bare bool) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	hdr := "X-Access-Token: " + token + "\r\n"
	if bare {
		hdr = ""
	}
	if _, err := io.WriteString(conn, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n"+hdr+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, res.StatusCode
}

// TestTunnelReachesTheSandboxsOwnPorts: CONNECT 127.0.0.1:<port> reaches
// a server of the sandbox's that listens on loopback, both ways; another
// host, a bad port, a port nothing listens on and a request without the
// access token are refused.
func TestTunnelReachesTheSandboxsOwnPorts(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "preview of "+r.URL.Path)
	}))
	t.Cleanup(app.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(app.URL, "http://"))

	conn, br, status := connectTo(t, f.url, "127.0.0.1:"+port, false)
	if status != http.StatusOK {
		t.Fatalf("CONNECT to the sandbox's port: %d", status)
	}
	for _, path := range []string{"/a", "/b"} { // one connection, two requests
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if string(body) != "preview of "+path {
			t.Errorf("through the tunnel: %q", body)
		}
	}

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := free.Addr().String()
	_ = free.Close()
	for _, c := range []struct {
		name, host string
		bare       bool
		want       int
	}{
		{"another host", "10.0.0.1:" + port, false, http.StatusForbidden},
		{"a name", "example.com:" + port, false, http.StatusForbidden},
		{"no port", "127.0.0.1", false, http.StatusBadRequest},
		{"port 0", "127.0.0.1:0", false, http.StatusBadRequest},
		{"nothing listening", closed, false, http.StatusBadGateway},
		{"no access token", "127.0.0.1:" + port, true, http.StatusUnauthorized},
	} {
		if _, _, got := connectTo(t, f.url, c.host, c.bare); got != c.want {
			t.Errorf("%s: CONNECT %s: %d, want %d", c.name, c.host, got, c.want)
		}
	}
}
