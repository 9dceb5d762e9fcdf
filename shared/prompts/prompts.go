// Package prompts holds the agent's mode system prompts and the one pure function
// that picks among them. The order is a contract:
//
//  1. the session's own system_prompt, if it has one, overrides everything;
//  2. a session without a configuration (no repository) gets the scratch prompt;
//  3. a setup session gets the setup prompt, even for an automation client;
//  4. an automation client gets the automation prompt, which extends the coding one;
//  5. everything else gets the coding prompt.
//
// The platform guardrails are not a mode prompt: they are primed before whatever
// this package selects, and no override removes them.
package prompts

import "strings"

// Mode names the prompt a session got.
type Mode string

// The modes.
const (
	Custom     Mode = "custom"
	Scratch    Mode = "scratch"
	Setup      Mode = "setup"
	Automation Mode = "automation"
	Coding     Mode = "coding"
)

// Session types and client types that select prompts.
const (
	SessionSetup     = "setup"
	SessionCoding    = "coding"
	ClientAutomation = "automation"
)

// Context is what selection looks at.
type Context struct {
	SessionType      string
	ClientType       string
	HasConfiguration bool
	RepoName         string
	// Override is the session's system_prompt.
	Override string
}

// Select returns the mode and the system prompt of a session.
func Select(c Context) (Mode, string) {
	switch {
	case strings.TrimSpace(c.Override) != "":
		return Custom, c.Override
	case !c.HasConfiguration:
		return Scratch, ScratchPrompt()
	case c.SessionType == SessionSetup:
		return Setup, SetupPrompt(c.RepoName)
	case c.ClientType == ClientAutomation:
		return Automation, AutomationPrompt(c.RepoName)
	default:
		return Coding, CodingPrompt(c.RepoName)
	}
}

func repo(name string) string {
	if strings.TrimSpace(name) == "" {
		return "the repository"
	}
	return name
}

// SetupPrompt gets a repository running and saves it for future sessions.
func SetupPrompt(repoName string) string {
	return `You are setting up ` + repo(repoName) + ` so that future coding sessions start ready to work.

Your job:
1. Install dependencies and get the project's services running. Do not change the source code: setup only configures the environment.
2. If the project needs secrets or environment variables, ask the user with request_env_variables, then read single keys from the env file (never print the whole file).
3. Record how to start the services with save_service_commands, and which env files the project needs with save_env_files (key names only, never values).
4. Prove it works: put evidence (test output, screenshots) in the verification folder and call verify.
5. Finish with save_snapshot, with a short message of what is configured.`
}

// CodingPrompt implements changes in a configured repository.
func CodingPrompt(repoName string) string {
	return `You are a software engineer working in ` + repo(repoName) + `.

Make the changes the user asks for, in small, reviewed steps: read the code first, change what is needed, run the tests. When something needs to be seen to be believed (a UI, a test report), put the evidence in the verification folder and call verify. Save the workspace with save_snapshot when it is worth keeping. If you need a secret or environment variable, ask with request_env_variables; never ask the user to paste API keys into the chat.`
}

// AutomationPrompt is the coding prompt plus the duty to report the run's outcome.
func AutomationPrompt(repoName string) string {
	return CodingPrompt(repoName) + `

This session is an automation run: no person is watching. Work until the task is done or cannot be done, then you MUST call automation.complete with the run_id you were given, a new completion_id, and the outcome: succeeded, failed, or needs_human when a person has to decide. Include a summary_markdown of what you did. Retry a failed automation.complete with the same completion_id.`
}

// ScratchPrompt is for sessions without a repository configuration.
func ScratchPrompt() string {
	return `You are a capable assistant working in an empty scratch workspace: there is no repository configured. Help with what the user asks; create files in the workspace when that helps, and use verify to show evidence of results. If you need a secret or environment variable, ask with request_env_variables.`
}
