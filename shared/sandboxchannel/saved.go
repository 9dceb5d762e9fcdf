package sandboxchannel

import (
	"context"
	"strings"

	"github.com/remote-agents/remote-agents/shared/registry"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// SnapshotPrefix is where the snapshots of configuration id are kept
// (toolgate's save_snapshot writes them): the only objects a spec hands a
// sandbox as its configuration's snapshot.
func SnapshotPrefix(id string) string { return "snapshots/configuration/" + id + "/" }

// saved is what configuration cfg saved, as a sandbox brings it back
// (sandboxwire.SavedConfiguration): its latest snapshot as a presigned URL,
// its env files and its service commands with their workspacePath joined.
// Nil when it saved nothing. Entries a sandbox could not use (a path that
// leaves the workspace, which toolspec never lets through) are left out.
func (c *Service) saved(ctx context.Context, cfg registry.Configuration) (*sandboxwire.SavedConfiguration, error) {
	out := &sandboxwire.SavedConfiguration{}
	if snap := cfg.Snapshot; snap != nil && strings.HasPrefix(snap.Key, SnapshotPrefix(cfg.ID)) && c.o.Blob != nil {
		u, err := c.o.Blob.PresignGet(ctx, snap.Key, sandboxwire.SnapshotURLTTL)
		if err != nil {
			return nil, err
		}
		out.Snapshot = &sandboxwire.SavedSnapshot{URL: u, SizeBytes: snap.SizeBytes, SavedAt: snap.SavedAt}
	}
	for _, f := range cfg.EnvFiles {
		p, ok := sandboxwire.WorkspacePath(f.WorkspacePath, f.Path)
		if !ok || p == "." {
			continue
		}
		file := sandboxwire.SavedEnvFile{Path: p, Format: f.Format, Keys: make([]sandboxwire.SavedEnvKey, 0, len(f.Keys))}
		for _, k := range f.Keys {
			file.Keys = append(file.Keys, sandboxwire.SavedEnvKey{Key: k.Key, Required: k.Required})
		}
		out.EnvFiles = append(out.EnvFiles, file)
	}
	for _, s := range cfg.ServiceCommands {
		cwd, ok := sandboxwire.WorkspacePath(s.WorkspacePath, s.Cwd)
		if !ok {
			continue
		}
		if cwd == "." {
			cwd = ""
		}
		out.Services = append(out.Services, sandboxwire.SavedService{Name: s.Name, Command: s.Command, Cwd: cwd})
	}
	if out.Snapshot == nil && len(out.EnvFiles) == 0 && len(out.Services) == 0 {
		return nil, nil
	}
	return out, nil
}
