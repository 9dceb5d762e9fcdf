package provision

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Prepared is a workspace a warm pool sandbox provisioned before any session
// claimed it: the fixed repository cloned and the setup commands run (what
// needs no session), with the events and warnings they made, which the
// claiming session's provisioning replays (Options.Prepared).
type Prepared struct {
	spec     sandboxwire.WorkspaceSpec
	events   []sandboxwire.Payload
	warnings []string
}

// Prepare clones ws's repository and runs its setup commands in o.Dir, as Run
// does, keeping its events rather than emitting them (no session is there to
// take them). Of ws it runs only those: no task context, saved
// configuration or service is a pool's.
func Prepare(ctx context.Context, ws sandboxwire.WorkspaceSpec, o Options) *Prepared {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	ws.Task, ws.Saved = nil, nil
	out := &Prepared{spec: ws}
	p := &provisioner{o: o, timeout: time.Duration(max(ws.SetupTimeoutSeconds, 1)) * time.Second, record: &out.events}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		p.warn(ctx, "workspace", "the workspace directory could not be made: "+err.Error())
	} else {
		switch {
		case ws.RepositoryURL != "" && ws.NoCheckout:
			p.initRepo(ctx, &ws)
		case ws.RepositoryURL != "":
			p.clone(ctx, &ws)
		}
		p.setup(ctx, ws.SetupCommands)
	}
	out.warnings = p.warnings
	return out
}

// of reports whether p prepared what ws asks for: the same repository,
// branch and setup commands, and nothing that had to come before them (a
// saved configuration's snapshot and env files are restored before setup).
func (p *Prepared) of(ws *sandboxwire.WorkspaceSpec) bool {
	return ws.RepositoryURL == p.spec.RepositoryURL && ws.Branch == p.spec.Branch && ws.NoCheckout == p.spec.NoCheckout && ws.Saved == nil &&
		slices.Equal(ws.SetupCommands, p.spec.SetupCommands) && ws.SetupTimeoutSeconds == p.spec.SetupTimeoutSeconds
}

// rest is ws without what p did.
func (p *Prepared) rest(ws *sandboxwire.WorkspaceSpec) *sandboxwire.WorkspaceSpec {
	out := *ws
	out.RepositoryURL, out.Branch, out.NoCheckout, out.SetupCommands = "", "", false, nil
	return &out
}

// empty removes what dir holds, keeping dir.
func empty(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
