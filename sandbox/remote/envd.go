package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/envd"
	"github.com/remote-agents/remote-agents/sandbox/policy"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// envdPolicy is the policy envd works under: the sandbox's, with the
// session's type's tools (nil: all of them).
type envdPolicy struct {
	*policy.Policy
	enabled []string
}

func (p envdPolicy) Enabled(tool string) bool {
	return (p.enabled == nil || slices.Contains(p.enabled, tool)) && p.Policy.Enabled(tool)
}

// serveEnvd serves envd on r.c.Envd until ctx ends: its processes run as
// the tool user, in the tools' environment with the spec's process
// environment over it, under the policy and the session's type's tools. The platform's sandbox proxy is its only client:
// it checks every request's access token, and the socket is the agent's
// alone.
func (r *run) serveEnvd(ctx context.Context, spec sandboxwire.Spec) error {
	if r.c.Envd == "" {
		return nil
	}
	pol, err := policy.New(policy.Defaults(), r.c.Workspace)
	if err != nil {
		return err
	}
	var ln net.Listener
	if path, ok := strings.CutPrefix(r.c.Envd, "unix:"); ok {
		ln, err = sandboxwire.ListenSocket(path)
	} else {
		ln, err = net.Listen("tcp", r.c.Envd)
	}
	if err != nil {
		return fmt.Errorf("envd: listen on %s: %w", r.c.Envd, err)
	}
	user := r.c.ToolUser
	o := envd.Options{Policy: envdPolicy{Policy: pol, enabled: spec.Tools}, Home: r.c.Workspace, HomeAlias: envd.SDKHome, Log: r.log, Owned: user.Own,
		Command: func(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: user.Credential()}
			return cmd, nil
		}}
	// The sandbox's home is its workspace (the SDKs' /home/user): a login
	// shell reads its profile there, not the machine's user's.
	extra := []string{"HOME=" + r.c.Workspace}
	for _, k := range slices.Sorted(maps.Keys(spec.ProcessEnv)) {
		extra = append(extra, k+"="+spec.ProcessEnv[k])
	}
	o.Env = func() []string {
		var env []string
		if r.c.Tools != nil {
			env = r.c.Tools.Environ()
		}
		return append(env, extra...)
	}
	srv := envd.New(o)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(shut)
		srv.Close()
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Warn("envd stopped", "error", err.Error())
		}
	}()
	r.log.Info("envd serving", "listen", r.c.Envd, "version", envd.Version)
	return nil
}
