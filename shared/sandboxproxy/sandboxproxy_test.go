package sandboxproxy_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/envdtoken"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/session/storetest"
)

const sandboxID = "0b7d6c1e-2f4a-4b9c-8d3e-5f6a7b8c9d0e"

// dialer dials the test's envd, whatever the sandbox.
type dialer struct{ addr string }

func (d dialer) DialSandbox(ctx context.Context, _ session.Session, _ int) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, "tcp", d.addr)
}

// TestStreamsBothWaysAtOnce: the proxy answers while the request's body
// is still coming (full duplex). An envd that answers a stream's headers
// before it has read its request's end gets the rest of that body, and the
// client the whole answer: net/http's HTTP/1 server would otherwise discard
// what is left of the body once the answer's headers go out, under the
// transport still copying it to the sandbox, and cut the stream.
func TestStreamsBothWaysAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	envd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		in := bufio.NewReader(r.Body)
		first, err := in.ReadString('\n')
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "got "+first)
		_ = http.NewResponseController(w).Flush()
		rest, err := io.ReadAll(in)
		if err != nil {
			_, _ = io.WriteString(w, "body: "+err.Error()+"\n")
			return
		}
		_, _ = io.WriteString(w, "then "+string(rest)+"\n")
	}))
	t.Cleanup(envd.Close)
	store := storetest.NewMemory()
	if err := store.Create(ctx, session.Session{ID: sandboxID, Tenant: "t", State: session.Idle, Generation: 1}, nil); err != nil {
		t.Fatal(err)
	}
	tokens := envdtoken.Random()
	proxy := httptest.NewServer(sandboxproxy.New(sandboxproxy.Options{Store: store, Dialer: dialer{envd.Listener.Addr().String()}, Tokens: tokens}))
	t.Cleanup(proxy.Close)

	body, send := io.Pipe()
	context.AfterFunc(ctx, func() { _ = send.CloseWithError(ctx.Err()) }) // a stuck proxy fails the test
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy.URL+"/process.Process/Start", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sandboxproxy.HeaderSandboxID, sandboxID)
	req.Header.Set(sandboxproxy.HeaderAccessToken, tokens.Token(sandboxID))
	go func() { _, _ = io.WriteString(send, "start\n") }()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	out := bufio.NewReader(res.Body)
	if line, err := out.ReadString('\n'); line != "got start\n" || err != nil {
		t.Fatalf("first line %q, %v", line, err)
	}
	// The answer is under way: the rest of the request follows.
	_, _ = io.WriteString(send, "more")
	_ = send.Close()
	rest, err := io.ReadAll(out)
	if string(rest) != "then more\n" || err != nil {
		t.Errorf("rest of the stream %q, %v", rest, err)
	}
}
