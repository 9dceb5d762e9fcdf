package client

import (
	"net/url"
	"strings"
)

// The routes the client calls, as the route table (shared/routes) writes
// their paths; a test checks each against it.
const (
	pathCreate      = "/api/remote_agents/create"
	pathAlive       = "/api/remote_agents/{id}/alive"
	pathShutdown    = "/api/remote_agents/{id}/shutdown"
	pathMessages    = "/api/remote_agents/{id}/messages"
	pathAttachments = "/api/remote_agents/{id}/attachments"
	pathEnv         = "/api/remote_agents/{id}/env"
	pathEvents      = "/api/remote_agents/{id}/events"
	pathTool        = "/api/remote_agents/{id}/workspace/tools/{tool}"
	pathList        = "/api/remote_agents"
	pathKill        = "/api/remote_agents/{id}/kill"
	pathPause       = "/api/remote_agents/{id}/pause"
	pathResume      = "/api/remote_agents/{id}/resume"
	pathFork        = "/api/remote_agents/{id}/fork"
	pathCheckpoints = "/api/remote_agents/{id}/checkpoints"
)

// expand fills pattern's parameters ({name}), in order, with values, each
// escaped as one path segment.
func expand(pattern string, values ...string) string {
	var b strings.Builder
	rest := pattern
	for _, v := range values {
		i := strings.IndexByte(rest, '{')
		j := strings.IndexByte(rest, '}')
		if i < 0 || j < i {
			break
		}
		b.WriteString(rest[:i])
		b.WriteString(url.PathEscape(v))
		rest = rest[j+1:]
	}
	b.WriteString(rest)
	return b.String()
}
