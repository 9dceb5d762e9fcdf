package systemtest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/remote-agents/remote-agents/api/envd/process"
	"github.com/remote-agents/remote-agents/api/envd/process/processconnect"
	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// BenchmarkE2B: the sandbox API as the E2B SDKs use it, on the wire they
// speak. Per iteration: a create of a sandbox of a type with a warm pool to
// the first output of its first command, through the sandbox proxy; a
// command's start (its first output) through the proxy and straight to the
// sandbox's envd; an upload and a download of RA_BENCH_E2B_FILE_MB (100)
// through the proxy.
func BenchmarkE2B(b *testing.B) {
	s := start(b, withSandboxEnv("RA_NO_TMUX=1"), withoutRefillOnClaim(), devtest.WithSandboxProxy())
	ws := map[string]any{"enabled": true, "repo_source": map[string]any{"type": "none"}, "warm_pool_size": 1, "tools": []string{"bash", "read", "write"}}
	if r := s.call(http.MethodPost, agentTypes, appKey, map[string]any{"id": "e2b-warm", "name": "e2b-warm", "workspace_config": ws}); r.status != http.StatusCreated {
		b.Fatalf("create type: %d %s", r.status, r.raw)
	}
	refill := func() {
		b.StopTimer()
		defer b.StartTimer()
		s.sweep()
		s.waitIdle("e2b-warm", 1)
	}
	refill()
	mb := envInt("RA_BENCH_E2B_FILE_MB", 100)
	file := make([]byte, mb<<20)
	if _, err := rand.Read(file); err != nil {
		b.Fatal(err)
	}
	fileSeries := strconv.Itoa(mb) + " MB"
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		r := s.e2bCall(http.MethodPost, "/v2/sandboxes", devtest.E2BKey, map[string]any{"templateID": "e2b-warm"})
		if r.status != http.StatusCreated {
			b.Fatalf("create: %d %s", r.status, r.raw)
		}
		id, tok := r.str("sandboxID"), r.str("envdAccessToken")
		proxied := s.proxiedEnvd(id, tok)
		firstOutput(b, proxied)
		rec.Add("create → first command output (warm pool)", time.Since(began))

		began = time.Now()
		firstOutput(b, proxied)
		rec.Add("command start → first output, through the proxy", time.Since(began))
		direct := s.directEnvd(b, id)
		began = time.Now()
		firstOutput(b, direct)
		rec.Add("command start → first output, straight to envd", time.Since(began))

		began = time.Now()
		s.envdFiles(b, http.MethodPost, id, tok, file)
		rec.Add("upload "+fileSeries+" (octet-stream)", time.Since(began))
		began = time.Now()
		if got := s.envdFiles(b, http.MethodGet, id, tok, nil); !bytes.Equal(got, file) {
			b.Fatalf("downloaded %d bytes, not the %d uploaded", len(got), len(file))
		}
		rec.Add("download "+fileSeries, time.Since(began))

		b.StopTimer()
		if k := s.e2bCall(http.MethodDelete, "/sandboxes/"+id, devtest.E2BKey, nil); k.status != http.StatusNoContent {
			b.Fatalf("kill: %d %s", k.status, k.raw)
		}
		b.StartTimer()
		refill()
	}
	b.StopTimer()
	rec.Figure("command start, proxy/direct (p50)", rec.Percentile("command start → first output, through the proxy", 0.5)/rec.Percentile("command start → first output, straight to envd", 0.5))
	rec.Figure("upload MB/s (p50)", float64(mb)/(rec.Percentile("upload "+fileSeries+" (octet-stream)", 0.5)/1000))
	rec.Figure("download MB/s (p50)", float64(mb)/(rec.Percentile("download "+fileSeries, 0.5)/1000))
	rec.Done()
}

// firstOutput starts `echo ready` and waits for its first output.
func firstOutput(b *testing.B, c processconnect.ProcessClient) {
	b.Helper()
	stream, err := c.Start(b.Context(), connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/echo", Args: []string{"ready"}}}))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		if stream.Msg().GetEvent().GetData() != nil {
			return
		}
	}
	b.Fatalf("no output: %v", stream.Err())
}

// directEnvd is a process client of sandbox id's envd on its socket,
// not through the proxy.
func (s *stack) directEnvd(b *testing.B, id string) processconnect.ProcessClient {
	b.Helper()
	sess, err := s.srv.Env.SessionStore().Get(b.Context(), id)
	if err != nil {
		b.Fatal(err)
	}
	sock := s.srv.Launcher.EnvdSocket(sess.PoolSandbox, 1)
	if sess.PoolSandbox == "" {
		sock = s.srv.Launcher.EnvdSocket(id, sess.Generation)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return sandboxwire.DialSocket(ctx, sock)
	}}}
	return processconnect.NewProcessClient(hc, "http://envd", connect.WithProtoJSON())
}

// envdFiles uploads body to (POST) or downloads (GET) bench.bin of sandbox
// id through the proxy, as the SDKs' octet-stream upload and download do.
func (s *stack) envdFiles(b *testing.B, method, id, tok string, body []byte) []byte {
	b.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.Context(), method, s.srv.SandboxProxyURL+"/files?path=bench.bin", rd)
	if err != nil {
		b.Fatal(err)
	}
	sandboxHeaders{id, tok}.set(req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	// Raw bytes: random data does not compress (Go's client would ask for
	// gzip, as Node's fetch does).
	req.Header.Set("Accept-Encoding", "identity")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	out, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("%s /files: %d %v %.200s", method, res.StatusCode, err, out)
	}
	return out
}
