package systemtest_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	pb "github.com/remote-agents/remote-agents/api/envd/process"
	"github.com/remote-agents/remote-agents/api/envd/process/processconnect"
	"github.com/remote-agents/remote-agents/localstack/devtest"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// envdClient is a process client of the envd agent id's sandbox serves on
// its socket.
func (s *stack) envdClient(t *testing.T, id string) processconnect.ProcessClient {
	t.Helper()
	sess, err := s.srv.Env.SessionStore().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	sock := s.srv.Launcher.EnvdSocket(id, sess.Generation)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return sandboxwire.DialSocket(ctx, sock)
	}}}
	return processconnect.NewProcessClient(hc, "http://envd", connect.WithProtoJSON())
}

// TestSandboxesServeEnvd: every sandbox serves envd, the E2B sandbox API,
// beside its agent: a command runs in its workspace as its tools' commands
// do, its output streamed.
func TestSandboxesServeEnvd(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	id, _ := s.mustCreate()
	st, err := s.envdClient(t, id).Start(t.Context(), connect.NewRequest(&pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "echo from envd; pwd; echo $WORKSPACE"}}}))
	if err != nil {
		t.Fatal(err)
	}
	var out string
	var end *pb.ProcessEvent_EndEvent
	for st.Receive() {
		out += string(st.Msg().GetEvent().GetData().GetStdout())
		if e := st.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if st.Err() != nil || end == nil || end.GetExitCode() != 0 {
		t.Fatalf("envd: %v, end %v, output %q (sandbox log %s)", st.Err(), end, out, s.sandboxLog(t, id))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || lines[0] != "from envd" || lines[1] != lines[2] || !strings.HasSuffix(lines[1], id+"-1") {
		t.Errorf("envd ran %q; want its line, then the workspace twice", out)
	}
}

// TestSandboxProxyRoutesToEnvd: the sandbox proxy routes a request by its
// E2b-Sandbox-Id header to that sandbox's envd, once its X-Access-Token is
// one of the agent's session tokens; a paused sandbox is 502, its health
// too.
func TestSandboxProxyRoutesToEnvd(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"), devtest.WithSandboxProxy())
	id, tok := s.mustCreate()
	headers := func(token string) connect.ClientOption {
		return connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("E2b-Sandbox-Id", id)
				req.Header().Set("E2b-Sandbox-Port", "49983")
				if token != "" {
					req.Header().Set("X-Access-Token", token)
				}
				return next(ctx, req)
			}
		}))
	}
	client := func(token string) processconnect.ProcessClient {
		return processconnect.NewProcessClient(http.DefaultClient, s.srv.SandboxProxyURL, connect.WithProtoJSON(), headers(token))
	}
	if _, err := client(tok).List(t.Context(), connect.NewRequest(&pb.ListRequest{})); err != nil {
		t.Fatalf("list through the proxy: %v", err)
	}
	for _, bad := range []string{"", "rs_" + strings.Repeat("x", 40)} {
		if _, err := client(bad).List(t.Context(), connect.NewRequest(&pb.ListRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("token %q: %v", bad, err)
		}
	}
	health := func() int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.SandboxProxyURL+"/health", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if got := health(); got != http.StatusNoContent {
		t.Errorf("health of a running sandbox: %d", got)
	}
	if p := s.call(http.MethodPost, "/api/remote_agents/"+id+"/pause", tok, nil); p.status != http.StatusOK {
		t.Fatalf("pause: %d %s", p.status, p.raw)
	}
	if got := health(); got != http.StatusBadGateway {
		t.Errorf("health of a paused sandbox: %d, want 502", got)
	}
	if _, err := client(tok).List(t.Context(), connect.NewRequest(&pb.ListRequest{})); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("a paused sandbox's envd: %v, want unavailable (502)", err)
	}
}
