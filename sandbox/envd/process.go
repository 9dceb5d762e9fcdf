package envd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	pb "github.com/remote-agents/remote-agents/api/envd/process"
)

// Limits of processes.
const (
	// MaxProcesses bounds the processes running at once.
	MaxProcesses = 64
	// readSize is how much output one data event carries at most.
	readSize = 32 << 10
	// defaultKeepalive is the keepalive interval of a stream whose client
	// names none (Keepalive-Ping-Interval, seconds).
	defaultKeepalive = 90 * time.Second
	// subscriberBuffer is how many events wait for a slow client before
	// the process's output waits for it.
	subscriberBuffer = 256
	// ttyDrain is how long a terminal's output is read after its process
	// ended while a child of it still holds the terminal.
	ttyDrain = 2 * time.Second
)

// processes are the processes envd started, by pid.
type processes struct {
	mu   sync.Mutex
	byID map[uint32]*proc
}

func newProcesses() *processes { return &processes{byID: map[uint32]*proc{}} }

// proc is one process and the clients attached to its output.
type proc struct {
	pid    uint32
	tag    string
	config *pb.ProcessConfig
	cmd    *exec.Cmd
	tty    *os.File // the terminal's master side; nil without one
	cancel context.CancelFunc

	mu    sync.Mutex
	stdin io.WriteCloser // nil once closed, or never open
	subs  map[*subscriber]struct{}
	ended *pb.ProcessEvent // the end event, once there is one
	done  chan struct{}
}

// subscriber is one client's view of a process's events.
type subscriber struct {
	events chan *pb.ProcessEvent
	gone   chan struct{}
}

func (p *processes) add(pr *proc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.byID) >= MaxProcesses {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d processes run already: wait for one to end", MaxProcesses))
	}
	p.byID[pr.pid] = pr
	return nil
}

func (p *processes) remove(pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, pid)
}

// find is the process sel names: not_found for none.
func (p *processes) find(sel *pb.ProcessSelector) (*proc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case sel == nil:
	case sel.GetTag() != "":
		for _, pr := range p.byID {
			if pr.tag == sel.GetTag() {
				return pr, nil
			}
		}
	default:
		if pr, ok := p.byID[sel.GetPid()]; ok {
			return pr, nil
		}
	}
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such process"))
}

func (p *processes) list() []*proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*proc, 0, len(p.byID))
	for _, pr := range p.byID {
		out = append(out, pr)
	}
	return out
}

func (p *processes) killAll() {
	for _, pr := range p.list() {
		pr.signal(syscall.SIGKILL)
	}
}

// subscribe attaches a client to pr's events from now on; its end, if it
// has ended, is the first it gets.
func (pr *proc) subscribe() *subscriber {
	sub := &subscriber{events: make(chan *pb.ProcessEvent, subscriberBuffer), gone: make(chan struct{})}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ended != nil {
		sub.events <- pr.ended
		close(sub.events)
		return sub
	}
	pr.subs[sub] = struct{}{}
	return sub
}

func (pr *proc) unsubscribe(sub *subscriber) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	delete(pr.subs, sub)
	close(sub.gone)
}

// publish hands ev to every attached client, waiting for a slow one
// rather than losing output, but not for one that left.
func (pr *proc) publish(ev *pb.ProcessEvent) {
	pr.mu.Lock()
	subs := make([]*subscriber, 0, len(pr.subs))
	for s := range pr.subs {
		subs = append(subs, s)
	}
	pr.mu.Unlock()
	for _, s := range subs {
		select {
		case s.events <- ev:
		case <-s.gone:
		}
	}
}

// finish publishes pr's end and closes every client's events.
func (pr *proc) finish(end *pb.ProcessEvent) {
	pr.publish(end)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.ended = end
	for s := range pr.subs {
		close(s.events)
		delete(pr.subs, s)
	}
	close(pr.done)
}

// signal signals pr's process group.
func (pr *proc) signal(sig syscall.Signal) {
	if pr.cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-pr.cmd.Process.Pid, sig); err != nil {
		_ = pr.cmd.Process.Signal(sig)
	}
}

// processService serves process.Process.
type processService struct{ s *Server }

// Start starts a process and streams its events: its start first.
func (ps *processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	pr, sub, err := ps.s.start(ctx, req.Msg)
	if err != nil {
		return err
	}
	return ps.s.stream(ctx, pr, sub, keepaliveOf(req.Header()), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.StartResponse{Event: ev})
	})
}

// Connect re-attaches to a running process: its start, then its events
// from now on.
func (ps *processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	pr, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sub := pr.subscribe()
	return ps.s.stream(ctx, pr, sub, keepaliveOf(req.Header()), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.ConnectResponse{Event: ev})
	})
}

// List lists the running processes.
func (ps *processService) List(context.Context, *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	out := &pb.ListResponse{}
	for _, pr := range ps.s.procs.list() {
		info := &pb.ProcessInfo{Config: pr.config, Pid: pr.pid}
		if pr.tag != "" {
			info.Tag = &pr.tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// Update resizes a process's terminal.
func (ps *processService) Update(_ context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	pr, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if size := req.Msg.GetPty().GetSize(); size != nil {
		if pr.tty == nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process has no terminal"))
		}
		if err := pty.Setsize(pr.tty, &pty.Winsize{Cols: uint16(min(size.GetCols(), 1<<15)), Rows: uint16(min(size.GetRows(), 1<<15))}); err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}

// StreamInput is not served: the SDKs send input with SendInput.
func (ps *processService) StreamInput(context.Context, *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("send input with SendInput"))
}

// SendInput writes to a process's stdin or terminal.
func (ps *processService) SendInput(_ context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	pr, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	in := req.Msg.GetInput()
	switch {
	case in.GetPty() != nil:
		if pr.tty == nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process has no terminal"))
		}
		_, err = pr.tty.Write(in.GetPty())
	default:
		pr.mu.Lock()
		w := pr.stdin
		pr.mu.Unlock()
		if w == nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("the process's stdin is closed"))
		}
		_, err = w.Write(in.GetStdin())
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// SendSignal signals a process (and the processes of its group).
func (ps *processService) SendSignal(_ context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	pr, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		pr.signal(syscall.SIGKILL)
	case pb.Signal_SIGNAL_SIGTERM:
		pr.signal(syscall.SIGTERM)
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signal must be SIGNAL_SIGTERM or SIGNAL_SIGKILL"))
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

// CloseStdin closes a process's stdin.
func (ps *processService) CloseStdin(_ context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	pr, err := ps.s.procs.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	pr.mu.Lock()
	w := pr.stdin
	pr.stdin = nil
	pr.mu.Unlock()
	if w != nil {
		_ = w.Close()
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// keepaliveOf is the keepalive interval a stream's client asks for.
func keepaliveOf(h interface{ Get(string) string }) time.Duration {
	if n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(min(n, 3600)) * time.Second
	}
	return defaultKeepalive
}

// commandLine is what the policy checks of a process: the script of a
// shell's -c, else the command and its arguments.
func commandLine(c *pb.ProcessConfig) string {
	args := c.GetArgs()
	switch base := c.GetCmd()[strings.LastIndexByte(c.GetCmd(), '/')+1:]; base {
	case "bash", "sh", "zsh", "dash":
		for i, a := range args {
			if a == "-c" && i+1 < len(args) {
				return args[i+1]
			}
			if strings.HasPrefix(a, "-") && strings.Contains(a, "c") && !strings.HasPrefix(a, "--") && i+1 < len(args) {
				return args[i+1] // -lc
			}
		}
	}
	return strings.TrimSpace(c.GetCmd() + " " + strings.Join(args, " "))
}

// start starts the process req asks for, under the policy, and attaches
// the caller to its events before the first. Its lifetime is the
// request's deadline (Connect-Timeout-Ms), as envd's is; none, until it
// ends.
func (s *Server) start(ctx context.Context, req *pb.StartRequest) (*proc, *subscriber, error) {
	c := req.GetProcess()
	if c == nil || c.GetCmd() == "" {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	if s.o.Policy != nil {
		if !s.o.Policy.Enabled("bash") {
			return nil, nil, connect.NewError(connect.CodePermissionDenied, errors.New("this sandbox's agent type does not enable bash: it runs no command"))
		}
		if err := s.o.Policy.CheckCommand(commandLine(c)); err != nil {
			return nil, nil, connect.NewError(connect.CodePermissionDenied, err)
		}
	}
	dir := s.o.Home
	if c.Cwd != nil && c.GetCwd() != "" {
		d, err := s.checkPath("read", c.GetCwd())
		if err != nil {
			return nil, nil, err
		}
		dir = d
	}
	life, cancel := context.WithCancel(context.Background())
	if deadline, ok := ctx.Deadline(); ok {
		life, cancel = context.WithDeadline(context.Background(), deadline)
	}
	cmd, err := s.o.Command(life, c.GetCmd(), c.GetArgs()...)
	if err != nil {
		cancel()
		return nil, nil, connect.NewError(connect.CodeFailedPrecondition, err)
	}
	cmd.Dir = dir
	var env []string
	if s.o.Env != nil {
		env = s.o.Env()
	}
	for k, v := range c.GetEnvs() {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	pr := &proc{config: c, cmd: cmd, cancel: cancel, tag: req.GetTag(), subs: map[*subscriber]struct{}{}, done: make(chan struct{})}
	cmd.Cancel = func() error { pr.signal(syscall.SIGKILL); return nil }
	cmd.WaitDelay = 2 * time.Second
	var outputs []io.Reader
	if size := req.GetPty().GetSize(); req.Pty != nil {
		// The terminal makes the process a session leader, its group's.
		cmd.SysProcAttr.Setpgid = false
		ws := &pty.Winsize{Cols: 80, Rows: 24}
		if size != nil {
			ws = &pty.Winsize{Cols: uint16(max(min(size.GetCols(), 1<<15), 1)), Rows: uint16(max(min(size.GetRows(), 1<<15), 1))}
		}
		tty, err := pty.StartWithSize(cmd, ws)
		if err != nil {
			cancel()
			return nil, nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("start %s: %w", c.GetCmd(), err))
		}
		pr.tty = tty
		outputs = []io.Reader{tty}
	} else {
		cmd.SysProcAttr.Setpgid = true
		stdout, err1 := cmd.StdoutPipe()
		stderr, err2 := cmd.StderrPipe()
		var stdin io.WriteCloser
		var err3 error
		if req.Stdin == nil || req.GetStdin() {
			stdin, err3 = cmd.StdinPipe()
		}
		if err := errors.Join(err1, err2, err3); err != nil {
			cancel()
			return nil, nil, connect.NewError(connect.CodeInternal, err)
		}
		if err := cmd.Start(); err != nil {
			cancel()
			return nil, nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("start %s: %w", c.GetCmd(), err))
		}
		pr.stdin = stdin
		outputs = []io.Reader{stdout, stderr}
	}
	pr.pid = uint32(cmd.Process.Pid) //nolint:gosec // a pid is positive and below 2^22
	sub := pr.subscribe()
	if err := s.procs.add(pr); err != nil {
		pr.signal(syscall.SIGKILL)
		_ = cmd.Wait()
		cancel()
		return nil, nil, err
	}
	go s.run(pr, outputs)
	return pr, sub, nil
}

// run copies pr's output to its clients until it ends, then publishes its
// end.
func (s *Server) run(pr *proc, outputs []io.Reader) {
	var wg sync.WaitGroup
	for i, r := range outputs {
		wg.Go(func() {
			buf := make([]byte, readSize)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					data := &pb.ProcessEvent_DataEvent{}
					chunk := append([]byte(nil), buf[:n]...)
					switch {
					case pr.tty != nil:
						data.Output = &pb.ProcessEvent_DataEvent_Pty{Pty: chunk}
					case i == 0:
						data.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: chunk}
					default:
						data.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: chunk}
					}
					pr.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: data}})
				}
				if err != nil {
					return
				}
			}
		})
	}
	if pr.tty != nil {
		// The terminal's reads end (EIO) once the process and every holder
		// of the terminal are gone, after what it still buffers. Closing it
		// sooner loses that output; a child left holding it gets ttyDrain.
		err := pr.cmd.Wait()
		drained := make(chan struct{})
		go func() { wg.Wait(); close(drained) }()
		grace := time.NewTimer(ttyDrain)
		select {
		case <-drained:
		case <-grace.C:
		}
		grace.Stop()
		_ = pr.tty.Close()
		<-drained
		s.ended(pr, err)
		return
	}
	wg.Wait()
	s.ended(pr, pr.cmd.Wait())
}

// ended publishes pr's end: its exit code (-1 when a signal ended it), and
// the error a non-zero exit is.
func (s *Server) ended(pr *proc, err error) {
	pr.cancel()
	end := &pb.ProcessEvent_EndEvent{ExitCode: -1}
	if st := pr.cmd.ProcessState; st != nil {
		end.ExitCode, end.Exited, end.Status = int32(st.ExitCode()), st.Exited(), st.String() //nolint:gosec // an exit code is -1 to 255
	}
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}
	pr.mu.Lock()
	if pr.stdin != nil {
		_ = pr.stdin.Close()
		pr.stdin = nil
	}
	pr.mu.Unlock()
	s.procs.remove(pr.pid)
	pr.finish(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
}

// stream sends a client pr's start, then its events as they come, with a
// keepalive after every interval of quiet, until its end or the client
// leaves.
func (s *Server) stream(ctx context.Context, pr *proc, sub *subscriber, keepalive time.Duration, send func(*pb.ProcessEvent) error) error {
	defer pr.unsubscribe(sub)
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pr.pid}}}); err != nil {
		return err
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-sub.events:
			if !ok {
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
			tick.Reset(keepalive)
		case <-tick.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
