package config

import (
	"bytes"
	"fmt"
	"strings"
)

// Reader is a process that reads a setting.
type Reader string

// The processes that read settings.
const (
	// PlatformFunctions are the Lambda functions and the dev server, which
	// read their settings through Load.
	PlatformFunctions Reader = "platform functions"
	// DevServer is `make dev` (localstack/cmd/devserver).
	DevServer Reader = "dev server"
	// SandboxAgent is the agent in a sandbox (dist/agent, sandbox/agentconfig).
	SandboxAgent Reader = "sandbox agent"
	// Tooling are the tests, the emulators, the benchmarks and LocalStack's
	// init hook.
	Tooling Reader = "tests and tools"
)

// Variable is one environment variable of the reference: its name, the
// processes that read it (the first is where it is listed), its default and
// its meaning, both as Markdown.
type Variable struct {
	Name    string
	Readers []Reader
	Default string
	Meaning string
	// Value is the default as the variable would be written, for those whose
	// default is a plain value; a test sets it and expects the defaults.
	Value string
	// set parses a platform variable's value into its field (Parse reads
	// the rows that have one); emptyIsValue says an empty value is one (an
	// empty list), not the default.
	set          func(p *Platform, v string) error
	emptyIsValue bool
}

// Key is one key of config.yaml's remote_agents section: its dotted path,
// the variable that overrides it, its default as YAML and its meaning.
type Key struct {
	Path     string
	Variable string
	Default  string
	Meaning  string
}

// readerTitles introduce each reader's table, in the reference's order.
var readerTitles = []struct {
	reader Reader
	title  string
	intro  string
}{
	{PlatformFunctions, "Platform functions",
		"Read once at start by every Lambda function and by the dev server (`shared/config`, `config.Load`); the `remote_agents` keys above may come from the file instead. An unset or empty variable keeps its default (but for the lists where empty is a value); a malformed one stops start-up with a message naming it."},
	{DevServer, "Dev server",
		"`make dev` (`localstack/cmd/devserver`) reads these besides the platform's. It passes `RA_LLM_PROVIDER`, `RA_LLM_MODEL`, `RA_LLM_SCRIPT`, `RA_TOKEN_LIMIT`, `RA_LLM_MAX_TOKENS` and `RA_LLM_TEMPERATURE` on to its sandboxes, which inherit nothing else of its `RA_` and `AWS_` variables and none of the providers' key variables. It is their model gateway: for a hosted provider it keeps the key (from the provider's variable, or the one `RA_LLM_API_KEY_ENV` names) and sends the calls to `RA_LLM_BASE_URL` if set (unless `RA_MODEL_UPSTREAM_<PROVIDER>` says otherwise); for a local server (`ollama`, `openai-compatible`) it passes `RA_LLM_BASE_URL`, `RA_LLM_API_KEY_ENV` and that variable on."},
	{SandboxAgent, "Sandbox agent",
		"The agent (`dist/agent`, `sandbox/agentconfig`) reads these once when it starts, and removes the secret ones from its environment. Launchers set the sandbox's identity under the agent contract's names and a one-time `RA_BOOTSTRAP_CODE`, never a token. Of the launcher's own environment a local sandbox gets only the host variables (`PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, `TZ`, `TMPDIR`, `USER`, `LOGNAME`, `SHELL`) and what the dev server passes on. `agent run` and `agent rpc` take their model from `agent.json` instead."},
	{Tooling, "Tests and tools", "The tests, the bundled emulators, the benchmarks and LocalStack's init hook."},
}

// Markdown renders the configuration reference, docs/configuration.md:
// the config file's keys, then the variables by the process that reads them.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString(`<!-- Generated from shared/config (reference.go, variables.go) by
     go test . -run TestConfigurationReference -update   (or: make docs).
     Do not edit: edit the table and regenerate. -->

# Configuration reference

Every setting of Remote Agents, from one table in code (` + "`shared/config`" + `): the
` + "`remote_agents`" + ` section of the config file, then every environment variable, by
the process that reads it. A test fails when this page differs from the table,
when the code names an ` + "`RA_*`" + ` variable the table lacks, and when the table
lists one no code names.

## The config file

A ` + "`config.yaml`" + ` in the working directory (or the file ` + "`RA_CONFIG`" + ` names, which
must then exist) may hold a ` + "`remote_agents`" + ` section; every key has an
environment override, so a Lambda function needs no file. Other top-level
sections belong to other parts of the system and are left alone. An unknown
key, a wrong type or an out-of-range value stops start-up with a message naming
the key.

| Key | Variable | Default | Meaning |
|---|---|---|---|
`)
	for _, k := range Keys {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", k.Path, code(k.Variable), k.Default, k.Meaning)
	}
	b.WriteString("\n## Environment variables\n")
	for _, rt := range readerTitles {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n| Variable | Read by | Default | Meaning |\n|---|---|---|---|\n", rt.title, rt.intro)
		for _, v := range Variables {
			if v.Readers[0] != rt.reader {
				continue
			}
			readers := make([]string, len(v.Readers))
			for i, r := range v.Readers {
				readers[i] = string(r)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, strings.Join(readers, ", "), v.Default, v.Meaning)
		}
	}
	return b.Bytes()
}

// code quotes a variable's name, or says there is none.
func code(name string) string {
	if name == "" {
		return "none"
	}
	return "`" + name + "`"
}

// Parsed reports whether Parse reads the variable (a platform setting).
func (v Variable) Parsed() bool { return v.set != nil }
