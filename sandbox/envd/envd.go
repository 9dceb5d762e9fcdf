// Package envd is the E2B sandbox agent's API served from inside our
// sandboxes, so that the E2B SDKs work on them unchanged: the Connect RPC
// services process.Process (commands and terminals, their output streamed
// and fanned out to every attached client) and filesystem.Filesystem, the
// HTTP routes GET /health and GET, POST /files, and CONNECT to a port of
// the sandbox's own (what its preview URLs reach, through the sandbox
// proxy). Everything it does goes through the sandbox's tool policy: a type
// that does not enable bash starts no process, and every path is checked as
// the file tools check theirs. Its wire contract is api/envd; what it
// serves, docs/e2b.md.
package envd

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/remote-agents/remote-agents/api/envd/filesystem/filesystemconnect"
	"github.com/remote-agents/remote-agents/api/envd/process/processconnect"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Version is the envd version served (sandboxwire.EnvdVersion).
const Version = sandboxwire.EnvdVersion

// SDKHome is the home the SDKs name paths in: the sandbox's user's.
const SDKHome = "/home/user"

// Port is the port the SDKs reach envd on.
const Port = sandboxwire.EnvdPort

// DefaultUser is the user the SDKs may name (Authorization: Basic
// "user:"): every command runs as the sandbox's tool user, whatever its
// name.
const DefaultUser = "user"

// Policy is what the sandbox's tool policy decides for envd
// (policy.Policy has it).
type Policy interface {
	// Enabled reports whether the tool (bash for processes) is enabled.
	Enabled(tool string) bool
	// CheckPath resolves path for the tool (read or write) and checks it.
	CheckPath(tool, path string) (string, error)
	// CheckCommand checks a shell command line.
	CheckCommand(command string) error
}

// Options configure a Server.
type Options struct {
	// AccessToken, when set, is what every request but GET /health must
	// carry in X-Access-Token (or, for /files, sign).
	AccessToken string
	// Policy decides which commands and paths are allowed.
	Policy Policy
	// Home is the working directory of a process that names none, and
	// what relative paths are relative to (the workspace).
	Home string
	// HomeAlias is the home the SDKs name (E2B's /home/user), where the
	// sandbox's home is elsewhere: a path under it is the same path under
	// Home, and paths under Home are answered under it. "": none.
	HomeAlias string
	// Command makes the command a process runs (the sandbox's user, its
	// confinement and network); nil: exec.CommandContext.
	Command func(ctx context.Context, name string, args ...string) (*exec.Cmd, error)
	// Env is the base environment of processes (toolenv); nil: none but
	// their own.
	Env func() []string
	// Owned, when set, is given every file and folder envd creates (the
	// tool user's, as the file tools' are).
	Owned func(path string) error
	// Log is where envd logs; nil: slog.Default().
	Log *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Server serves envd.
type Server struct {
	o     Options
	procs *processes
	watch *watchers
}

// New returns a Server.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Command == nil {
		o.Command = func(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
			return exec.CommandContext(ctx, name, args...), nil
		}
	}
	return &Server{o: o, procs: newProcesses(), watch: newWatchers()}
}

// Close kills every process envd started and stops its watchers.
func (s *Server) Close() {
	s.procs.killAll()
	s.watch.closeAll()
}

// Handler is envd's HTTP handler: its RPC services, /health and /files,
// and CONNECT to the sandbox's own ports.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	opts := connect.WithInterceptors(s.authInterceptor())
	mux.Handle(processconnect.NewProcessHandler(&processService{s: s}, opts))
	mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s: s}, opts))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /files", s.download)
	mux.HandleFunc("POST /files", s.upload)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			s.tunnel(w, r) // a port of the sandbox's (tunnel)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the access token.
func (s *Server) authorized(h http.Header) bool {
	if s.o.AccessToken == "" {
		return true
	}
	got := h.Get("X-Access-Token")
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.o.AccessToken)) == 1
}

// authInterceptor refuses RPCs without the access token, and with a user
// other than the sandbox's.
func (s *Server) authInterceptor() connect.Interceptor {
	return &auth{s: s}
}

type auth struct{ s *Server }

func (a *auth) check(h http.Header) error {
	if !a.s.authorized(h) {
		return connect.NewError(connect.CodeUnauthenticated, errText("the access token is missing or wrong"))
	}
	if u, ok := basicUser(h.Get("Authorization")); ok && u != DefaultUser {
		return connect.NewError(connect.CodeUnauthenticated, errText("user "+u+" is not available: commands run as "+DefaultUser))
	}
	return nil
}

func (a *auth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a *auth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a *auth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// basicUser is the user of an "Authorization: Basic base64(user:)"
// header.
func basicUser(h string) (string, bool) {
	raw, ok := strings.CutPrefix(h, "Basic ")
	if !ok {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(raw))
	if err != nil {
		return "", false
	}
	u, _, _ := strings.Cut(string(dec), ":")
	return u, u != ""
}

type errText string

func (e errText) Error() string { return string(e) }

// httpError writes envd's HTTP error body: {"code", "message"}.
func httpError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": message})
}
