package toolspec

import "slices"

// The agent's workspace tools: the built-in tools of the sandbox's tool
// registry (sandbox/tools), which an agent type enables by name. The contract
// tools above are not among them: which of those a session gets follows from
// its kind (ForSession), whatever its type.
const (
	Read        = "read"
	Write       = "write"
	Edit        = "edit"
	Glob        = "glob"
	Grep        = "grep"
	LS          = "ls"
	Bash        = "bash"
	Git         = "git"
	MemoryRead  = "memory_read"
	MemoryWrite = "memory_write"
	WebFetch    = "web_fetch"
	WebSearch   = "web_search"
)

var workspaceTools = []string{Read, Write, Edit, Glob, Grep, LS, Bash, Git, MemoryRead, MemoryWrite, WebFetch, WebSearch}

// WorkspaceTools returns the names of every workspace tool, in a fixed order:
// the valid entries of an agent type's tools.
func WorkspaceTools() []string { return slices.Clone(workspaceTools) }

// IsWorkspaceTool reports whether name is a workspace tool.
func IsWorkspaceTool(name string) bool { return slices.Contains(workspaceTools, name) }
