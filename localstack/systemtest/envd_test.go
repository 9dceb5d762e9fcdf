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
