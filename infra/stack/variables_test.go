package stack

import (
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/config"
)

// TestEveryVariableTheStackSetsIsInTheConfigTable: the stack writes its
// functions' and sandboxes' settings as names; each one is a row of
// config.Variables read by that process (the platform functions, the
// sandbox agent), so a misspelt or retired name fails here instead of being
// ignored at run time.
func TestEveryVariableTheStackSetsIsInTheConfigTable(t *testing.T) {
	readers := map[string][]config.Reader{}
	for _, v := range config.Variables {
		readers[v.Name] = v.Readers
	}
	check := func(env, where, name string, want config.Reader) {
		t.Helper()
		r, ok := readers[name]
		switch {
		case !ok:
			t.Errorf("%s: %s sets %s, which config.Variables lacks", env, where, name)
		case !slices.Contains(r, want):
			t.Errorf("%s: %s sets %s, which config.Variables says the %s do not read (readers %v)", env, where, name, want, r)
		}
	}
	for env, tp := range synth(t) {
		seen := 0
		for _, fn := range tp.byType("AWS::Lambda::Function") {
			p := props(fn)
			name, _ := p["FunctionName"].(string)
			if !strings.HasPrefix(name, "ra-"+env+"-") {
				continue // the CDK's own (custom resources), not ours
			}
			environment, _ := p["Environment"].(map[string]any)
			vars, _ := environment["Variables"].(map[string]any)
			for v := range vars {
				seen++
				check(env, "function "+name, v, config.PlatformFunctions)
			}
		}
		for _, td := range tp.byType("AWS::ECS::TaskDefinition") {
			// The egress and sandbox proxies are platform processes; the
			// sandbox runs the agent.
			where, reader := "the sandbox container", config.SandboxAgent
			switch props(td)["Family"] {
			case "ra-" + env + "-egress-proxy":
				where, reader = "the egress proxy's container", config.PlatformFunctions
			case "ra-" + env + "-sandbox-proxy":
				where, reader = "the sandbox proxy's container", config.PlatformFunctions
			}
			containers, _ := props(td)["ContainerDefinitions"].([]any)
			for _, c := range containers {
				cd, _ := c.(map[string]any)
				pairs, _ := cd["Environment"].([]any)
				for _, pair := range pairs {
					name, _ := pair.(map[string]any)["Name"].(string)
					seen++
					check(env, where, name, reader)
				}
			}
		}
		if seen == 0 {
			t.Errorf("%s: the stack sets no variable at all: the test reads the template wrongly", env)
		}
	}
}
