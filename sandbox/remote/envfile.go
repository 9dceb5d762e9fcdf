package remote

import (
	"maps"
	"slices"

	"github.com/remote-agents/remote-agents/sandbox/envfile"
)

// mergeEnv merges values into the env file, gives it to the tools' user, and
// puts the file's values into the tools' environment and into what is hidden
// from their output: the user's values are for the workspace's programs, not
// for the events apps and viewers read.
func (r *run) mergeEnv(values map[string]string) error {
	merged, err := envfile.Merge(r.c.EnvFile, values)
	if err != nil {
		return err
	}
	if err := r.c.ToolUser.Own(r.c.EnvFile); err != nil {
		return err
	}
	if r.c.Tools != nil {
		r.c.Tools.SetValues(merged)
	}
	r.c.Secrets.Add(slices.Collect(maps.Values(merged))...)
	return nil
}
