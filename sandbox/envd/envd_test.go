package envd_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/remote-agents/remote-agents/api/envd/filesystem"
	"github.com/remote-agents/remote-agents/api/envd/filesystem/filesystemconnect"
	pb "github.com/remote-agents/remote-agents/api/envd/process"
	"github.com/remote-agents/remote-agents/api/envd/process/processconnect"
	"github.com/remote-agents/remote-agents/sandbox/envd"
)

const token = "tok-123"

// policy allows bash when bash is set, and every path under root; the
// command "forbidden" is refused.
type policy struct {
	bash bool
	root string
}

func (p policy) Enabled(tool string) bool { return tool != "bash" || p.bash }

func (p policy) CheckPath(_, path string) (string, error) {
	clean := filepath.Clean(path)
	if clean != p.root && !strings.HasPrefix(clean, p.root+"/") {
		return "", errors.New("outside the workspace: " + path)
	}
	return clean, nil
}

func (p policy) CheckCommand(c string) error {
	if strings.Contains(c, "forbidden") {
		return errors.New("bash: " + c + " is denied")
	}
	return nil
}

type fixture struct {
	home  string
	url   string
	procs processconnect.ProcessClient
	fs    filesystemconnect.FilesystemClient
}

// setup serves envd over a home of its own; alias, if given, is the home
// the client names (HomeAlias).
func setup(t *testing.T, bash bool, alias ...string) fixture {
	t.Helper()
	home := t.TempDir()
	s := envd.New(envd.Options{AccessToken: token, Home: home, HomeAlias: strings.Join(alias, ""), Policy: policy{bash: bash, root: home},
		Env: func() []string { return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "BASE=base"} }})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("X-Access-Token", token)
			return next(ctx, req)
		}
	}), streamAuth{})
	return fixture{home: home, url: srv.URL,
		procs: processconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithProtoJSON(), auth),
		fs:    filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL, connect.WithProtoJSON(), auth)}
}

// streamAuth sets the access token on streams, as the SDKs do.
type streamAuth struct{}

func (streamAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (streamAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("X-Access-Token", token)
		conn.RequestHeader().Set("Keepalive-Ping-Interval", "1")
		return conn
	}
}
func (streamAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// result is what a process's stream said.
type result struct {
	pid            uint32
	stdout, stderr string
	pty            string
	end            *pb.ProcessEvent_EndEvent
	keepalives     int
}

// drain reads a process stream to its end; the first event must be its
// start, unless the caller read it.
func drain(t *testing.T, next func() bool, msg func() *pb.ProcessEvent, err func() error, started ...bool) result {
	t.Helper()
	var r result
	first := len(started) == 0
	for next() {
		ev := msg()
		if first && ev.GetStart() == nil {
			t.Fatalf("the first event is %v, not the start", ev)
		}
		first = false
		switch {
		case ev.GetStart() != nil:
			r.pid = ev.GetStart().GetPid()
		case ev.GetData() != nil:
			r.stdout += string(ev.GetData().GetStdout())
			r.stderr += string(ev.GetData().GetStderr())
			r.pty += string(ev.GetData().GetPty())
		case ev.GetEnd() != nil:
			r.end = ev.GetEnd()
		case ev.GetKeepalive() != nil:
			r.keepalives++
		}
	}
	if e := err(); e != nil {
		t.Fatalf("stream: %v", e)
	}
	return r
}

func (f fixture) run(t *testing.T, req *pb.StartRequest) result {
	t.Helper()
	st, err := f.procs.Start(t.Context(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	return drain(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
}

func bash(script string) *pb.ProcessConfig {
	return &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", script}}
}

func TestCommandsStreamTheirOutputAndEnd(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	cfg := bash("echo out; echo err >&2; echo $BASE $MINE; pwd; exit 3")
	cfg.Envs = map[string]string{"MINE": "mine"}
	r := f.run(t, &pb.StartRequest{Process: cfg, Stdin: new(false)})
	if r.pid == 0 || r.stdout != "out\nbase mine\n"+f.home+"\n" || r.stderr != "err\n" {
		t.Errorf("pid %d, stdout %q, stderr %q", r.pid, r.stdout, r.stderr)
	}
	if r.end == nil || r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetError() != "exit status 3" {
		t.Errorf("end %v; want exit code 3, error exit status 3", r.end)
	}
	ok := f.run(t, &pb.StartRequest{Process: bash("true")})
	if ok.end == nil || ok.end.GetExitCode() != 0 || ok.end.Error != nil {
		t.Errorf("a command that succeeds ends with %v", ok.end)
	}
}

func TestStdinReattachAndSignals(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	st, err := f.procs.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: bash("read line; echo got $line; cat; echo closed"), Tag: new("reader")}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() || st.Msg().GetEvent().GetStart() == nil {
		t.Fatalf("no start: %v", st.Err())
	}
	pid := st.Msg().GetEvent().GetStart().GetPid()
	// A second client re-attaches by tag and sees what comes next.
	again, err := f.procs.Connect(ctx, connect.NewRequest(&pb.ConnectRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Tag{Tag: "reader"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Receive() || again.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect's first event: %v %v", again.Msg(), again.Err())
	}
	list, err := f.procs.List(ctx, connect.NewRequest(&pb.ListRequest{}))
	if err != nil || len(list.Msg.GetProcesses()) != 1 || list.Msg.GetProcesses()[0].GetPid() != pid || list.Msg.GetProcesses()[0].GetTag() != "reader" {
		t.Errorf("list: %v %v", list, err)
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: pid}}
	if _, err := f.procs.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: []byte("hello\nrest")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.procs.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	first := drain(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() }, st.Err, true)
	second := drain(t, again.Receive, func() *pb.ProcessEvent { return again.Msg().GetEvent() }, again.Err, true)
	want := "got hello\nrestclosed\n"
	if first.stdout != want || second.stdout != want || first.end.GetExitCode() != 0 || second.end.GetExitCode() != 0 {
		t.Errorf("the starter saw %q (%v), the re-attached %q (%v); want %q", first.stdout, first.end, second.stdout, second.end, want)
	}
	if _, err := f.procs.SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: sel, Signal: pb.Signal_SIGNAL_SIGKILL})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a signal to an ended process: %v, want not_found", err)
	}

	// A kill ends a long command and what it started.
	long, err := f.procs.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: bash("sleep 300 & wait")}))
	if err != nil || !long.Receive() {
		t.Fatalf("start: %v %v", err, long.Err())
	}
	lp := long.Msg().GetEvent().GetStart().GetPid()
	if _, err := f.procs.SendSignal(ctx, connect.NewRequest(&pb.SendSignalRequest{Process: &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: lp}}, Signal: pb.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	killed := drain(t, long.Receive, func() *pb.ProcessEvent { return long.Msg().GetEvent() }, long.Err, true)
	if killed.end == nil || killed.end.GetExitCode() != -1 || killed.end.GetError() != "signal: killed" {
		t.Errorf("killed: %v", killed.end)
	}
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	st, err := f.procs.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"--norc", "--noprofile", "-i"},
		Envs: map[string]string{"TERM": "xterm-256color", "PS1": "$ "}}, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 80, Rows: 24}}}))
	if err != nil || !st.Receive() {
		t.Fatalf("start: %v %v", err, st.Err())
	}
	sel := &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: st.Msg().GetEvent().GetStart().GetPid()}}
	if _, err := f.procs.Update(ctx, connect.NewRequest(&pb.UpdateRequest{Process: sel, Pty: &pb.PTY{Size: &pb.PTY_Size{Cols: 100, Rows: 30}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.procs.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: sel, Input: &pb.ProcessInput{Input: &pb.ProcessInput_Pty{Pty: []byte("stty size; tty; exit 7\n")}}})); err != nil {
		t.Fatal(err)
	}
	r := drain(t, st.Receive, func() *pb.ProcessEvent { return st.Msg().GetEvent() }, st.Err, true)
	if !strings.Contains(r.pty, "30 100") || !strings.Contains(r.pty, "/dev/pts/") || r.end.GetExitCode() != 7 || r.stdout != "" {
		t.Errorf("terminal said %q, stdout %q, ended %v", r.pty, r.stdout, r.end)
	}
}

func TestDeadlineKeepaliveAndPolicy(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	// The request's deadline is the process's life, as envd's is; quiet
	// streams get keepalives.
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	st, err := f.procs.Start(ctx, connect.NewRequest(&pb.StartRequest{Process: bash("echo started; exec sleep 300")}))
	if err != nil {
		t.Fatal(err)
	}
	keepalives, started := 0, false
	for st.Receive() {
		ev := st.Msg().GetEvent()
		keepalives += map[bool]int{true: 1}[ev.GetKeepalive() != nil]
		started = started || strings.Contains(string(ev.GetData().GetStdout()), "started")
	}
	if connect.CodeOf(st.Err()) != connect.CodeDeadlineExceeded || !started || keepalives < 1 {
		t.Errorf("stream ended %v after %d keepalives (started %v); want deadline_exceeded after one or more", st.Err(), keepalives, started)
	}
	eventuallyGone(t, f)

	startErr := func(f fixture, script string) error {
		st, err := f.procs.Start(t.Context(), connect.NewRequest(&pb.StartRequest{Process: bash(script)}))
		if err != nil {
			return err
		}
		for st.Receive() {
		}
		return st.Err()
	}
	if err := startErr(f, "echo forbidden"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a denied command: %v", err)
	}
	if err := startErr(setup(t, false), "true"); connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "does not enable bash") {
		t.Errorf("a type without bash: %v", err)
	}
	// No token: unauthenticated.
	bare := processconnect.NewProcessClient(http.DefaultClient, f.url, connect.WithProtoJSON())
	if _, err := bare.List(t.Context(), connect.NewRequest(&pb.ListRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("without the token: %v", err)
	}
}

// eventuallyGone waits until no process is listed.
func eventuallyGone(t *testing.T, f fixture) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		list, err := f.procs.List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
		if err == nil && len(list.Msg.GetProcesses()) == 0 {
			return
		}
	}
	t.Errorf("the process outlived its deadline")
}

func TestFilesystem(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	if _, err := f.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: "a/b/c"})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: f.home + "/a/b"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("make an existing folder: %v", err)
	}
	if err := os.WriteFile(filepath.Join(f.home, "a", "file.txt"), []byte("12345"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file.txt", filepath.Join(f.home, "a", "link")); err != nil {
		t.Fatal(err)
	}
	st, err := f.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "a/file.txt"}))
	if e := st.Msg.GetEntry(); err != nil || e.GetType() != fspb.FileType_FILE_TYPE_FILE || e.GetSize() != 5 || e.GetPermissions() != "-rw-r-----" || e.GetName() != "file.txt" || e.GetPath() != f.home+"/a/file.txt" {
		t.Errorf("stat: %v %v", st, err)
	}
	link, err := f.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "a/link"}))
	if err != nil || link.Msg.GetEntry().GetSymlinkTarget() != "file.txt" {
		t.Errorf("stat of a link: %v %v", link, err)
	}
	for depth, want := range map[uint32]int{1: 3, 2: 4, 0: 3} {
		list, err := f.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: "a", Depth: depth}))
		if err != nil || len(list.Msg.GetEntries()) != want {
			t.Errorf("list depth %d: %v %v; want %d entries", depth, list, err, want)
		}
	}
	if _, err := f.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: "a/file.txt", Destination: "x/y/moved.txt"})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "a/file.txt"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("stat of what moved: %v", err)
	}
	if _, err := f.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: "x"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.home, "x")); !os.IsNotExist(err) {
		t.Errorf("removed folder: %v", err)
	}
	if _, err := f.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/etc/passwd"})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a path the policy refuses: %v", err)
	}

	// Watching: a start event first, then each change.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := f.fs.WatchDir(wctx, connect.NewRequest(&fspb.WatchDirRequest{Path: "a", Recursive: true}))
	if err != nil || !w.Receive() || w.Msg().GetStart() == nil {
		t.Fatalf("watch: %v %v %v", err, w.Msg(), w.Err())
	}
	if err := os.WriteFile(filepath.Join(f.home, "a", "b", "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for w.Receive() {
		if ev := w.Msg().GetFilesystem(); ev != nil {
			if ev.GetName() != "b/new.txt" || ev.GetType() != fspb.EventType_EVENT_TYPE_CREATE {
				t.Errorf("first change: %v", ev)
			}
			break
		}
	}
}

func TestFilesUploadAndDownload(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	do := func(req *http.Request) (int, string) {
		t.Helper()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	// Multipart: the part's filename is the whole path.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range []string{f.home + "/up/one.txt", f.home + "/up/deep/two.txt"} {
		part, _ := mw.CreateFormFile("file", p)
		_, _ = part.Write([]byte("content of " + filepath.Base(p)))
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, f.url+"/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-Access-Token", token)
	if code, out := do(req); code != http.StatusOK || !strings.Contains(out, `"path":"`+f.home+`/up/deep/two.txt"`) {
		t.Fatalf("multipart upload: %d %s", code, out)
	}
	if raw, err := os.ReadFile(filepath.Join(f.home, "up", "deep", "two.txt")); err != nil || string(raw) != "content of two.txt" {
		t.Errorf("uploaded: %q %v", raw, err)
	}
	// Octet-stream, gzip-compressed, signed instead of the token.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	big := bytes.Repeat([]byte("0123456789"), 100000)
	_, _ = zw.Write(big)
	_ = zw.Close()
	sum := sha256.Sum256([]byte("big.bin:write::" + token))
	req, _ = http.NewRequest(http.MethodPost, f.url+"/files?path=big.bin&signature=v1_"+base64.RawStdEncoding.EncodeToString(sum[:]), &gz)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	if code, out := do(req); code != http.StatusOK {
		t.Fatalf("signed octet-stream upload: %d %s", code, out)
	}
	req, _ = http.NewRequest(http.MethodGet, f.url+"/files?path=big.bin", nil)
	req.Header.Set("X-Access-Token", token)
	if code, out := do(req); code != http.StatusOK || out != string(big) {
		t.Errorf("download: %d, %d bytes", code, len(out))
	}
	// Refused: no token, a bad signature, a path outside, a missing file.
	req, _ = http.NewRequest(http.MethodGet, f.url+"/files?path=big.bin&signature=v1_nope", nil)
	if code, _ := do(req); code != http.StatusUnauthorized {
		t.Errorf("a bad signature: %d", code)
	}
	for path, want := range map[string]int{"/etc/passwd": http.StatusForbidden, "missing.txt": http.StatusNotFound} {
		req, _ = http.NewRequest(http.MethodGet, f.url+"/files?path="+path, nil)
		req.Header.Set("X-Access-Token", token)
		if code, out := do(req); code != want || !strings.Contains(out, `"code":`) {
			t.Errorf("download %s: %d %s; want %d", path, code, out, want)
		}
	}
	req, _ = http.NewRequest(http.MethodGet, f.url+"/health", nil)
	if code, _ := do(req); code != http.StatusNoContent {
		t.Errorf("health: %d", code)
	}
}

// TestTheSDKsHomeIsTheSandboxs: the SDKs name paths in /home/user; a
// sandbox whose home is elsewhere (a workspace) takes them as its own and
// answers them so.
func TestTheSDKsHomeIsTheSandboxs(t *testing.T) {
	t.Parallel()
	f := setup(t, true, envd.SDKHome)
	ctx := t.Context()
	if _, err := f.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: envd.SDKHome + "/d"})); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(f.home, "d")); err != nil || !fi.IsDir() {
		t.Fatalf("/home/user/d made no folder in the home: %v", err)
	}
	list, err := f.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: envd.SDKHome}))
	if err != nil || len(list.Msg.GetEntries()) != 1 || list.Msg.GetEntries()[0].GetPath() != envd.SDKHome+"/d" {
		t.Errorf("list of /home/user: %v %v", list, err)
	}
	if _, err := f.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/home/username"})); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("a path that only starts like the home: %v, want permission denied (outside the home)", err)
	}
	res := f.run(t, &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/pwd", Cwd: new(envd.SDKHome + "/d")}})
	if res.stdout != filepath.Join(f.home, "d")+"\n" {
		t.Errorf("a process in /home/user/d ran in %q", res.stdout)
	}
}

// A watcher reports each change in the order it happened, as the kernel
// does: a rename by its old name (the new one created), a file that lived
// for an instant, what is made in a folder made just before (recursive),
// and a polling watcher's (CreateWatcher) the same.
func TestWatchReportsEachChangeInOrder(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	ctx := t.Context()
	dir := filepath.Join(f.home, "w")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := f.fs.WatchDir(wctx, connect.NewRequest(&fspb.WatchDirRequest{Path: "w", Recursive: true}))
	if err != nil || !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("watch: %v", err)
	}
	polled, err := f.fs.CreateWatcher(ctx, connect.NewRequest(&fspb.CreateWatcherRequest{Path: "w", Recursive: true}))
	if err != nil {
		t.Fatal(err)
	}
	script := `cd "$1" && echo 1 > zz.txt && echo 2 > aa.txt && mv zz.txt mm.txt && echo t > t.txt && rm t.txt && chmod 600 aa.txt && mkdir -p d/e && echo x > d/e/f.txt && echo end > end.txt`
	if out, err := exec.Command("sh", "-c", script, "sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := []string{"create zz.txt", "write zz.txt", "create aa.txt", "write aa.txt", "rename zz.txt", "create mm.txt",
		"create t.txt", "write t.txt", "remove t.txt", "chmod aa.txt", "create d"}
	var got []string
	name := func(ev *fspb.FilesystemEvent) string {
		return strings.ToLower(strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_")) + " " + ev.GetName()
	}
	for !slices.Contains(got, "create end.txt") && stream.Receive() {
		if ev := stream.Msg().GetFilesystem(); ev != nil {
			got = append(got, name(ev))
		}
	}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) || !slices.Contains(got, "create d/e/f.txt") {
		t.Errorf("changes %q, want %q, then d/e/f.txt created", got, want)
	}
	var took []string
	for !slices.Contains(took, "create end.txt") {
		evs, err := f.fs.GetWatcherEvents(ctx, connect.NewRequest(&fspb.GetWatcherEventsRequest{WatcherId: polled.Msg.GetWatcherId()}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Msg.GetEvents() {
			took = append(took, name(ev))
		}
	}
	// What is made in a new folder as it is being watched may come twice
	// (found there, and reported): the rest is the same.
	if len(took) < len(want) || !slices.Equal(took[:len(want)], want) || !slices.Contains(took, "create d/e/f.txt") {
		t.Errorf("the watcher's events %q, want %q, then d/e/f.txt created", took, want)
	}
}
