// Package toolspec is the one definition of the platform's contract tools (the
// agent contract's verify, save_snapshot, automation.complete, save_service_commands,
// save_env_files and request_env_variables): their names, where they run, which
// sessions get them, the JSON Schema the model is shown, and the checks every
// call's arguments pass. The sandbox registers its tools from it and the gateway's
// callback handler validates with it, so the two can never disagree.
package toolspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Tool names. AutomationCompleteAlias is the same tool under the name of its
// wrapper file; the gateway accepts both.
const (
	Verify                  = "verify"
	SaveSnapshot            = "save_snapshot"
	AutomationComplete      = "automation.complete"
	AutomationCompleteAlias = "automation_complete"
	SaveServiceCommands     = "save_service_commands"
	SaveEnvFiles            = "save_env_files"
	RequestEnvVariables     = "request_env_variables"
)

// Domain says where a tool runs.
type Domain string

// The domains.
const (
	// Gateway tools run server-side, called back over HTTP by the sandbox.
	Gateway Domain = "gateway"
	// Sandbox tools run inside the sandbox and return at once.
	Sandbox Domain = "sandbox"
)

// DefaultVerifyFolder is where verify looks when no folder is given.
const DefaultVerifyFolder = ".proliferate/.verification"

// Def is one contract tool.
type Def struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments, as the model sees it.
	Schema string
	Domain Domain
	// SetupOnly tools exist only in setup sessions.
	SetupOnly bool
	// Long tools may outlive a request: the gateway runs them on the tools queue.
	Long bool
}

var defs = []Def{
	{
		Name:        Verify,
		Description: "Upload verification evidence (screenshots, test logs, reports) from a folder in the workspace so the user can see it. Put the evidence in the folder first; default folder: " + DefaultVerifyFolder + ".",
		Domain:      Gateway,
		Long:        true,
		Schema: `{"type":"object","additionalProperties":false,"properties":{
			"folder":{"type":"string","minLength":1,"maxLength":500,"description":"Workspace-relative folder holding the evidence (default ` + DefaultVerifyFolder + `)."}}}`,
	},
	{
		Name:        SaveSnapshot,
		Description: "Save the workspace as a snapshot: of the configuration in a setup session, of this session otherwise. Call it when the workspace is in a state worth keeping.",
		Domain:      Gateway,
		Long:        true,
		Schema: `{"type":"object","additionalProperties":false,"properties":{
			"message":{"type":"string","maxLength":1000,"description":"A short summary of what the snapshot holds."}}}`,
	},
	{
		Name:        AutomationComplete,
		Description: "Report the outcome of an automation run. Mandatory at the end of every automation run; use a new completion_id for each distinct report and the same one when retrying.",
		Domain:      Gateway,
		Schema: `{"type":"object","additionalProperties":false,"required":["run_id","completion_id","outcome"],"properties":{
			"run_id":{"type":"string","minLength":1,"maxLength":128},
			"completion_id":{"type":"string","minLength":1,"maxLength":128},
			"outcome":{"type":"string","enum":["succeeded","failed","needs_human"]},
			"summary_markdown":{"type":"string","maxLength":20000},
			"citations":{"type":"array","maxItems":50,"items":{"type":"string","maxLength":1000}},
			"diff_ref":{"type":"string","maxLength":1000},
			"test_report_ref":{"type":"string","maxLength":1000},
			"side_effect_refs":{"type":"array","maxItems":50,"items":{"type":"string","maxLength":1000}}}}`,
	},
	{
		Name:        SaveServiceCommands,
		Description: "Save the commands that start this repository's services, so future sessions start them automatically. Setup sessions only.",
		Domain:      Gateway,
		SetupOnly:   true,
		Schema: `{"type":"object","additionalProperties":false,"required":["commands"],"properties":{
			"commands":{"type":"array","minItems":1,"maxItems":10,"items":{"type":"object","additionalProperties":false,"required":["name","command"],"properties":{
				"name":{"type":"string","minLength":1,"maxLength":100},
				"command":{"type":"string","minLength":1,"maxLength":1000},
				"cwd":{"type":"string","maxLength":500,"description":"Relative to the workspace root."},
				"workspacePath":{"type":"string","maxLength":500,"description":"The repository, in multi-repository workspaces."}}}}}}`,
	},
	{
		Name:        SaveEnvFiles,
		Description: "Save how to generate this repository's env files (which keys go into which file), so future sessions get them. Never pass secret values: only key names. Setup sessions only.",
		Domain:      Gateway,
		SetupOnly:   true,
		Schema: `{"type":"object","additionalProperties":false,"required":["files"],"properties":{
			"files":{"type":"array","minItems":1,"maxItems":10,"items":{"type":"object","additionalProperties":false,"required":["path","format","mode","keys"],"properties":{
				"path":{"type":"string","minLength":1,"maxLength":500,"description":"Relative path of the env file; no leading / and no '..'."},
				"workspacePath":{"type":"string","maxLength":500,"default":"."},
				"format":{"const":"dotenv"},
				"mode":{"const":"secret"},
				"keys":{"type":"array","minItems":1,"maxItems":50,"items":{"type":"object","additionalProperties":false,"required":["key","required"],"properties":{
					"key":{"type":"string","minLength":1,"maxLength":200},
					"required":{"type":"boolean"}}}}}}}}}`,
	},
	{
		Name:        RequestEnvVariables,
		Description: "Ask the user for environment variables or secrets. Returns at once; the values the user submits are written to the env file, from which you read single keys (never print the whole file).",
		Domain:      Sandbox,
		Schema: `{"type":"object","additionalProperties":false,"required":["keys"],"properties":{
			"keys":{"type":"array","minItems":1,"maxItems":50,"items":{"type":"object","additionalProperties":false,"required":["key"],"properties":{
				"key":{"type":"string","minLength":1,"maxLength":200},
				"description":{"type":"string","maxLength":1000},
				"type":{"type":"string","enum":["env","secret"]},
				"required":{"type":"boolean","default":true},
				"suggestions":{"type":"array","maxItems":10,"items":{"type":"object","additionalProperties":false,"required":["label"],"properties":{
					"label":{"type":"string","minLength":1,"maxLength":200},
					"value":{"type":"string","maxLength":4000},
					"instructions":{"type":"string","maxLength":2000}}}}}}}}}`,
	},
}

// All returns every contract tool, in a fixed order.
func All() []Def { return append([]Def(nil), defs...) }

// ForSession returns the tools a session of the given kind gets: setup-only tools
// only in setup sessions.
func ForSession(setup bool) []Def {
	var out []Def
	for _, d := range defs {
		if !d.SetupOnly || setup {
			out = append(out, d)
		}
	}
	return out
}

// Lookup returns the tool called name; the alias automation_complete is
// automation.complete.
func Lookup(name string) (Def, bool) {
	if name == AutomationCompleteAlias {
		name = AutomationComplete
	}
	for _, d := range defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Argument types, decoded after validation.
type (
	VerifyArgs struct {
		Folder string `json:"folder,omitempty"`
	}
	SnapshotArgs struct {
		Message string `json:"message,omitempty"`
	}
	CompleteArgs struct {
		RunID           string   `json:"run_id"`
		CompletionID    string   `json:"completion_id"`
		Outcome         string   `json:"outcome"`
		SummaryMarkdown string   `json:"summary_markdown,omitempty"`
		Citations       []string `json:"citations,omitempty"`
		DiffRef         string   `json:"diff_ref,omitempty"`
		TestReportRef   string   `json:"test_report_ref,omitempty"`
		SideEffectRefs  []string `json:"side_effect_refs,omitempty"`
	}
	ServiceCommand struct {
		Name          string `json:"name"`
		Command       string `json:"command"`
		Cwd           string `json:"cwd,omitempty"`
		WorkspacePath string `json:"workspacePath,omitempty"`
	}
	ServiceCommandsArgs struct {
		Commands []ServiceCommand `json:"commands"`
	}
	EnvKey struct {
		Key      string `json:"key"`
		Required bool   `json:"required"`
	}
	EnvFile struct {
		Path          string   `json:"path"`
		WorkspacePath string   `json:"workspacePath,omitempty"`
		Format        string   `json:"format"`
		Mode          string   `json:"mode"`
		Keys          []EnvKey `json:"keys"`
	}
	EnvFilesArgs struct {
		Files []EnvFile `json:"files"`
	}
	// EnvSuggestion and EnvRequest are the wire's: the sandbox shows the
	// arguments to the user as an env.request event.
	EnvSuggestion  = sandboxwire.EnvSuggestion
	EnvRequest     = sandboxwire.EnvKeyRequest
	RequestEnvArgs struct {
		Keys []EnvRequest `json:"keys"`
	}
)

// ErrInvalid wraps every argument error; its message says what is wrong.
var ErrInvalid = errors.New("invalid arguments")

// MaxArgsBytes bounds the arguments of one call.
const MaxArgsBytes = 64 * 1024

// Parse validates raw arguments of the tool called name against its schema and
// the checks a schema cannot say (relative paths, env key names), and decodes
// them into the tool's argument type (VerifyArgs, …). Errors wrap ErrInvalid.
func Parse(name string, raw json.RawMessage) (any, error) {
	d, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w: unknown tool %q", ErrInvalid, name)
	}
	if len(raw) > MaxArgsBytes {
		return nil, fmt.Errorf("%w: arguments are larger than %d bytes", ErrInvalid, MaxArgsBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage(`{}`)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: not valid JSON", ErrInvalid)
	}
	sch, err := compiled(d)
	if err != nil {
		return nil, err
	}
	if err := sch.Validate(inst); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, SchemaError(err))
	}
	c, ok := checks[d.Name]
	if !ok {
		return nil, fmt.Errorf("%w: no checks for %q", ErrInvalid, d.Name)
	}
	return c(raw)
}

// checks decode each tool's arguments and check what their schema cannot say.
var checks = map[string]func(json.RawMessage) (any, error){
	Verify:              func(raw json.RawMessage) (any, error) { return check(raw, (*VerifyArgs).check) },
	SaveSnapshot:        func(raw json.RawMessage) (any, error) { return check(raw, func(*SnapshotArgs) error { return nil }) },
	AutomationComplete:  func(raw json.RawMessage) (any, error) { return check(raw, func(*CompleteArgs) error { return nil }) },
	SaveServiceCommands: func(raw json.RawMessage) (any, error) { return check(raw, (*ServiceCommandsArgs).check) },
	SaveEnvFiles:        func(raw json.RawMessage) (any, error) { return check(raw, (*EnvFilesArgs).check) },
	RequestEnvVariables: func(raw json.RawMessage) (any, error) { return check(raw, (*RequestEnvArgs).check) },
}

// check defaults the folder and keeps it in the workspace.
func (a *VerifyArgs) check() error {
	if a.Folder == "" {
		a.Folder = DefaultVerifyFolder
	}
	return relativePath("folder", a.Folder)
}

// check wants a name and a command, and working folders in the workspace.
func (a *ServiceCommandsArgs) check() error {
	for i, c := range a.Commands {
		if strings.TrimSpace(c.Name) == "" || strings.TrimSpace(c.Command) == "" {
			return fmt.Errorf("commands[%d]: name and command must not be blank", i)
		}
		if c.Cwd != "" {
			if err := relativePath(fmt.Sprintf("commands[%d].cwd", i), c.Cwd); err != nil {
				return err
			}
		}
		if c.WorkspacePath != "" {
			if err := relativePath(fmt.Sprintf("commands[%d].workspacePath", i), c.WorkspacePath); err != nil {
				return err
			}
		}
	}
	return nil
}

// check keeps the files in the workspace and their keys variable names.
func (a *EnvFilesArgs) check() error {
	for i := range a.Files {
		f := &a.Files[i]
		if f.WorkspacePath == "" {
			f.WorkspacePath = "."
		}
		if err := relativePath(fmt.Sprintf("files[%d].path", i), f.Path); err != nil {
			return err
		}
		if err := relativePath(fmt.Sprintf("files[%d].workspacePath", i), f.WorkspacePath); err != nil {
			return err
		}
		for j, k := range f.Keys {
			if !envKey.MatchString(k.Key) {
				return fmt.Errorf("files[%d].keys[%d].key %q is not an environment variable name", i, j, k.Key)
			}
		}
	}
	return nil
}

// check wants environment variable names.
func (a *RequestEnvArgs) check() error {
	for i, k := range a.Keys {
		if !envKey.MatchString(k.Key) {
			return fmt.Errorf("keys[%d].key %q is not an environment variable name", i, k.Key)
		}
	}
	return nil
}

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func check[T any](raw json.RawMessage, fn func(*T) error) (any, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, err.Error())
	}
	if err := fn(&v); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, err.Error())
	}
	return v, nil
}

// relativePath refuses absolute paths, '..' anywhere, backslashes, NUL and '~'.
func relativePath(field, p string) error {
	switch {
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~"):
		return fmt.Errorf("%s must be a relative path", field)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("%s must not contain '\\' or NUL", field)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("%s must not contain '..'", field)
		}
	}
	if path.Clean(p) == ".." || strings.HasPrefix(path.Clean(p), "../") {
		return fmt.Errorf("%s must stay inside the workspace", field)
	}
	return nil
}

var (
	compileMu sync.Mutex
	schemas   = map[string]*jsonschema.Schema{}
)

func compiled(d Def) (*jsonschema.Schema, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	if s, ok := schemas[d.Name]; ok {
		return s, nil
	}
	s, err := Compile(d.Name, d.Schema)
	if err != nil {
		return nil, err
	}
	schemas[d.Name] = s
	return s, nil
}

// Compile compiles a tool's JSON Schema.
func Compile(name, schema string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "tool://" + name
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	return s, nil
}

var english = message.NewPrinter(language.English)

// SchemaError flattens a validation error into one line a model (or a person) can
// act on: "at /commands/0/name: minLength: …".
func SchemaError(err error) string {
	ve, ok := err.(*jsonschema.ValidationError) //nolint:errorlint // Validate returns it unwrapped
	if !ok {
		return err.Error()
	}
	var msgs []string
	for _, c := range leaves(ve) {
		loc := "/" + strings.Join(c.InstanceLocation, "/")
		msgs = append(msgs, fmt.Sprintf("at %s: %s", loc, c.ErrorKind.LocalizedString(english)))
	}
	return strings.Join(msgs, "; ")
}

func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// UploadPrefix is where a sandbox uploads the files of one gateway tool call
// (verify's evidence, save_snapshot's archive) and where the gateway finds them.
// The call id is hashed, so that no caller-chosen string shapes the key.
func UploadPrefix(sessionID, tool, callID string) string {
	sum := sha256.Sum256([]byte(callID))
	return "sessions/" + sessionID + "/tools/" + tool + "/" + hex.EncodeToString(sum[:16]) + "/"
}

// MaxCallIDLen bounds a tool_call_id.
const MaxCallIDLen = 255

var callID = regexp.MustCompile(`^[\x21-\x7e]+$`)

// ValidCallID reports whether id can be a tool_call_id: 1 to MaxCallIDLen
// printable ASCII characters.
func ValidCallID(id string) bool {
	return id != "" && len(id) <= MaxCallIDLen && callID.MatchString(id)
}
