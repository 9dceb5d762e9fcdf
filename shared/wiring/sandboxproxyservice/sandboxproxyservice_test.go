package sandboxproxyservice_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/config"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/launch"
	"github.com/remote-agents/remote-agents/shared/sandboxproxy"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/e2bservice"
	"github.com/remote-agents/remote-agents/shared/wiring/sandboxproxyservice"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// envd serves as a sandbox task's envd would, at envd's port of a loopback
// address of its own (127.x.y.z: the dev server's proxy may hold
// 127.0.0.1's): GET answers the path, POST echoes the body. It returns the
// address.
func envd(t *testing.T) netip.Addr {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// Full duplex, each read echoed at once.
			_ = http.NewResponseController(w).EnableFullDuplex()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Body.Read(buf)
				if n > 0 {
					_, _ = w.Write(buf[:n])
					_ = http.NewResponseController(w).Flush()
				}
				if err != nil {
					return
				}
			}
		}
		_, _ = io.WriteString(w, "envd "+r.URL.Path)
	})
	for range 20 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		ip := netip.AddrFrom4([4]byte{127, 64 | b[0]&63, b[1], 1 + b[2]%254})
		l, err := net.Listen("tcp", netip.AddrPortFrom(ip, sandboxwire.EnvdPort).String())
		if err != nil {
			continue // taken, or this loopback is 127.0.0.1 only
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ip
	}
	t.Fatal("no loopback address to serve envd's port on: 20 addresses of 127/8 taken")
	return netip.Addr{}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The service built from an Env over the local DynamoDB: a request with a
// sandbox's access token reaches the envd at the address its task's
// running recorded, both ways; one with another sandbox's token is
// refused; a session no task is recorded for is 502. The health listener
// answers apart. When its context ends the service shuts down: the health
// checks fail, and a stream in flight goes on to its end.
func TestServesTheRecordedTask(t *testing.T) {
	t.Parallel()
	set, _ := awstest.Resources(t)
	cfg := config.PlatformDefaults()
	cfg.Env = set.Env
	e, err := wiring.New(cfg, awstest.Config(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ip := envd(t)
	now := time.Now()
	running, unplaced := uuid.NewString(), uuid.NewString()
	for _, id := range []string{running, unplaced} {
		s := session.Session{ID: id, State: session.Idle, Generation: 1, CreatedAt: now, UpdatedAt: now, Launch: session.Launch{SandboxRef: "arn:task/" + id}}
		if err := e.SessionStore().Create(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := dynamo.NewAddresses(e.DynamoDB(), set.Idempotency.Name).Record(ctx, launch.Address{Addr: ip, Sandbox: running, Ref: "arn:task/" + running}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	key, err := e2bservice.Tokens(ctx, e)
	if err != nil {
		t.Fatal(err)
	}

	svc, err := sandboxproxyservice.Build(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	l, health := listen(t), listen(t)
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- svc.Serve(serveCtx, l, health) }()
	t.Cleanup(stop)

	call := func(method, id, tok, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+l.Addr().String()+"/files", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(sandboxproxy.HeaderSandboxID, id)
		req.Header.Set(sandboxproxy.HeaderAccessToken, tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := call(http.MethodGet, running, key.Token(running), ""); code != http.StatusOK || body != "envd /files" {
		t.Errorf("GET through the proxy: %d %q", code, body)
	}
	big := strings.Repeat("0123456789", 100_000)
	if code, body := call(http.MethodPost, running, key.Token(running), big); code != http.StatusOK || body != big {
		t.Errorf("POST through the proxy: %d, %d bytes back of %d", code, len(body), len(big))
	}
	if code, _ := call(http.MethodGet, running, key.Token(unplaced), ""); code != http.StatusUnauthorized {
		t.Errorf("another sandbox's token: %d", code)
	}
	if code, _ := call(http.MethodGet, unplaced, key.Token(unplaced), ""); code != http.StatusBadGateway {
		t.Errorf("a sandbox no task is recorded for: %d", code)
	}

	healthURL := "http://" + health.Addr().String() + "/"
	if res, err := http.Get(healthURL); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", res, err)
	} else {
		_ = res.Body.Close()
	}
	// A health check of the proxy's own port is envd's, which needs a
	// sandbox: never the service's.
	if res, err := http.Get("http://" + l.Addr().String() + "/health"); err != nil || res.StatusCode == http.StatusOK {
		t.Errorf("GET /health of the proxy's port: %v %v", res, err)
	} else {
		_ = res.Body.Close()
	}
	// A stream in flight at the shutdown goes on to its end, the health
	// checks failing meanwhile.
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+l.Addr().String()+"/stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sandboxproxy.HeaderSandboxID, running)
	req.Header.Set(sandboxproxy.HeaderAccessToken, key.Token(running))
	go func() { _, _ = io.WriteString(pw, "before ") }()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	first := make([]byte, len("before "))
	if _, err := io.ReadFull(res.Body, first); err != nil || string(first) != "before " {
		t.Fatalf("the stream's start: %q, %v", first, err)
	}
	stop()
	select {
	case <-svc.Draining():
	case <-ctx.Done():
		t.Fatal("the service did not start shutting down")
	}
	if res, err := http.Get(healthURL); err != nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("health while shutting down: %v %v", res, err)
	} else {
		_ = res.Body.Close()
	}
	go func() {
		_, _ = io.WriteString(pw, "after")
		_ = pw.Close()
	}()
	if rest, err := io.ReadAll(res.Body); err != nil || string(rest) != "after" {
		t.Errorf("the stream in flight at the shutdown, after it: %q, %v", rest, err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(sandboxproxyservice.ShutdownGrace + 5*time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get(healthURL); err == nil {
		t.Error("the health listener still answers after the shutdown")
	}
}
