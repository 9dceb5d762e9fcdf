package prompts

import (
	"strings"
	"testing"
)

func TestSelectPrecedence(t *testing.T) {
	cases := []struct {
		name string
		in   Context
		want Mode
	}{
		{"override wins over everything", Context{Override: "Be terse.", SessionType: SessionSetup, ClientType: ClientAutomation, HasConfiguration: true}, Custom},
		{"override wins without configuration", Context{Override: "Be terse."}, Custom},
		{"blank override is no override", Context{Override: "  \n", HasConfiguration: true}, Coding},
		{"no configuration is scratch", Context{ClientType: ClientAutomation}, Scratch},
		{"no configuration is scratch even for setup", Context{SessionType: SessionSetup}, Scratch},
		{"setup before automation", Context{SessionType: SessionSetup, ClientType: ClientAutomation, HasConfiguration: true}, Setup},
		{"setup", Context{SessionType: SessionSetup, HasConfiguration: true}, Setup},
		{"automation client", Context{SessionType: SessionCoding, ClientType: ClientAutomation, HasConfiguration: true}, Automation},
		{"coding by default", Context{HasConfiguration: true}, Coding},
		{"other client types code", Context{ClientType: "web", HasConfiguration: true}, Coding},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, text := Select(c.in)
			if got != c.want {
				t.Fatalf("Select(%+v) = %s, want %s", c.in, got, c.want)
			}
			if strings.TrimSpace(text) == "" {
				t.Fatal("empty prompt")
			}
			if got == Custom && text != c.in.Override {
				t.Fatalf("override not used verbatim: %q", text)
			}
		})
	}
}

func TestAutomationExtendsCoding(t *testing.T) {
	coding := CodingPrompt("acme/web")
	auto := AutomationPrompt("acme/web")
	if !strings.HasPrefix(auto, coding) {
		t.Fatal("the automation prompt must contain the whole coding prompt")
	}
	for _, want := range []string{"automation.complete", "run_id", "completion_id", "needs_human"} {
		if !strings.Contains(auto, want) {
			t.Errorf("automation prompt lacks %q", want)
		}
		if want == "automation.complete" && strings.Contains(coding, want) {
			t.Errorf("coding prompt must not require %q", want)
		}
	}
}

func TestModePromptsNameTheirTools(t *testing.T) {
	setup := SetupPrompt("acme/web")
	for _, want := range []string{"acme/web", "save_service_commands", "save_env_files", "verify", "save_snapshot", "request_env_variables", "Do not change the source code"} {
		if !strings.Contains(setup, want) {
			t.Errorf("setup prompt lacks %q", want)
		}
	}
	if strings.Contains(CodingPrompt("x"), "save_service_commands") {
		t.Error("coding prompt mentions a setup-only tool")
	}
	if strings.Contains(ScratchPrompt(), "repository configured") == false {
		t.Error("scratch prompt should say there is no repository")
	}
	if !strings.Contains(CodingPrompt(""), "the repository") {
		t.Error("an unnamed repository should read naturally")
	}
}
