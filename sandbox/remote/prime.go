package remote

import (
	"errors"
	"strings"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Message is one turn of the conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Prime builds the conversation a spec starts with: the priming message
// (guardrails first, then the mode's system prompt, then persona skill and
// experience), then the initial prompt as the first user turn. It refuses a spec
// without guardrails (fail closed).
func Prime(spec sandboxwire.Spec) ([]Message, error) {
	if strings.TrimSpace(spec.Guardrails.Content) == "" {
		return nil, errors.New("spec has no guardrails: refusing to prime")
	}
	var b strings.Builder
	b.WriteString(spec.Guardrails.Content)
	if p := strings.TrimSpace(spec.SystemPrompt); p != "" {
		b.WriteString("\n\n# Your task mode\n\n" + p)
	}
	if s := strings.TrimSpace(spec.Persona.Skill); s != "" {
		b.WriteString("\n\n# Persona skill\n\n" + s)
	}
	if e := strings.TrimSpace(spec.Persona.Experience); e != "" {
		b.WriteString("\n\n# Persona experience\n\n" + e)
	}
	return []Message{
		{Role: "system", Content: b.String()},
		{Role: "user", Content: spec.InitialPrompt},
	}, nil
}

// ConversationFile is where the primed conversation is written in the workspace.
const ConversationFile = "conversation.json"
