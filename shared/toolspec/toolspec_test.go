package toolspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEveryToolHasACompilingSchema(t *testing.T) {
	for _, d := range All() {
		if _, err := Compile(d.Name, d.Schema); err != nil {
			t.Errorf("%s: %v", d.Name, err)
		}
		if d.Description == "" {
			t.Errorf("%s has no description", d.Name)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(d.Schema), &v); err != nil || v["type"] != "object" {
			t.Errorf("%s: the schema the model sees must be an object schema: %v", d.Name, err)
		}
	}
}

func TestLookupAndGating(t *testing.T) {
	if d, ok := Lookup(AutomationCompleteAlias); !ok || d.Name != AutomationComplete {
		t.Errorf("alias: %+v %v", d, ok)
	}
	if _, ok := Lookup("save_everything"); ok {
		t.Error("unknown tool found")
	}
	names := func(ds []Def) string {
		var n []string
		for _, d := range ds {
			n = append(n, d.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(ForSession(false)); got != "verify,save_snapshot,automation.complete,request_env_variables" {
		t.Errorf("coding tools: %s", got)
	}
	if got := names(ForSession(true)); got != "verify,save_snapshot,automation.complete,save_service_commands,save_env_files,request_env_variables" {
		t.Errorf("setup tools: %s", got)
	}
	for _, d := range All() {
		want := Gateway
		if d.Name == RequestEnvVariables {
			want = Sandbox
		}
		if d.Domain != want {
			t.Errorf("%s runs in %s", d.Name, d.Domain)
		}
	}
}

func cmd(name, command string) map[string]any {
	return map[string]any{"name": name, "command": command}
}

func envFile(path string, keys ...string) map[string]any {
	var ks []map[string]any
	for _, k := range keys {
		ks = append(ks, map[string]any{"key": k, "required": true})
	}
	return map[string]any{"path": path, "format": "dotenv", "mode": "secret", "keys": ks}
}

func many[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func TestParse(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		tool  string
		args  any
		valid bool
	}{
		{Verify, map[string]any{}, true},
		{Verify, nil, true},
		{Verify, map[string]any{"folder": "out/evidence"}, true},
		{Verify, map[string]any{"folder": "/etc"}, false},
		{Verify, map[string]any{"folder": "a/../../etc"}, false},
		{Verify, map[string]any{"folder": ".."}, false},
		{Verify, map[string]any{"folder": "~/x"}, false},
		{Verify, map[string]any{"folder": ""}, false},
		{Verify, map[string]any{"folder": long(501)}, false},
		{Verify, map[string]any{"folder": 3}, false},
		{Verify, map[string]any{"dir": "x"}, false},

		{SaveSnapshot, map[string]any{}, true},
		{SaveSnapshot, map[string]any{"message": "node 20, postgres up"}, true},
		{SaveSnapshot, map[string]any{"message": long(1001)}, false},

		{AutomationComplete, map[string]any{"run_id": "r", "completion_id": "c", "outcome": "succeeded"}, true},
		{AutomationCompleteAlias, map[string]any{"run_id": "r", "completion_id": "c", "outcome": "needs_human", "summary_markdown": "# done", "citations": []string{"a"}, "diff_ref": "d", "test_report_ref": "t", "side_effect_refs": []string{"s"}}, true},
		{AutomationComplete, map[string]any{"completion_id": "c", "outcome": "succeeded"}, false},
		{AutomationComplete, map[string]any{"run_id": "r", "outcome": "succeeded"}, false},
		{AutomationComplete, map[string]any{"run_id": "r", "completion_id": "c"}, false},
		{AutomationComplete, map[string]any{"run_id": "r", "completion_id": "c", "outcome": "maybe"}, false},
		{AutomationComplete, map[string]any{"run_id": "", "completion_id": "c", "outcome": "failed"}, false},

		{SaveServiceCommands, map[string]any{"commands": []any{cmd("web", "npm start")}}, true},
		{SaveServiceCommands, map[string]any{"commands": []any{map[string]any{"name": "web", "command": "npm start", "cwd": "apps/web", "workspacePath": "web"}}}, true},
		{SaveServiceCommands, map[string]any{"commands": many(10, func(i int) any { return cmd(fmt.Sprint("s", i), "run") })}, true},
		{SaveServiceCommands, map[string]any{"commands": []any{}}, false},
		{SaveServiceCommands, map[string]any{"commands": many(11, func(i int) any { return cmd(fmt.Sprint("s", i), "run") })}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{cmd("", "run")}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{cmd("  ", "run")}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{cmd(long(101), "run")}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{cmd("web", "")}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{cmd("web", long(1001))}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{map[string]any{"name": "w", "command": "c", "cwd": long(501)}}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{map[string]any{"name": "w", "command": "c", "workspacePath": long(501)}}}, false},
		{SaveServiceCommands, map[string]any{"commands": []any{map[string]any{"name": "w", "command": "c", "cwd": "../.."}}}, false},
		{SaveServiceCommands, map[string]any{}, false},

		{SaveEnvFiles, map[string]any{"files": []any{envFile(".env", "DATABASE_URL")}}, true},
		{SaveEnvFiles, map[string]any{"files": []any{envFile("apps/web/.env.local", many(50, func(i int) string { return fmt.Sprint("K", i) })...)}}, true},
		{SaveEnvFiles, map[string]any{"files": many(10, func(i int) any { return envFile(fmt.Sprint(".env", i), "A") })}, true},
		{SaveEnvFiles, map[string]any{"files": many(11, func(i int) any { return envFile(fmt.Sprint(".env", i), "A") })}, false},
		{SaveEnvFiles, map[string]any{"files": []any{}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile("/etc/.env", "A")}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile("../.env", "A")}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile("a/../../.env", "A")}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile(long(501), "A")}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile(".env")}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile(".env", many(51, func(i int) string { return fmt.Sprint("K", i) })...)}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile(".env", "NOT A KEY")}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{envFile(".env", long(201))}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{map[string]any{"path": ".env", "format": "yaml", "mode": "secret", "keys": []any{map[string]any{"key": "A", "required": true}}}}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{map[string]any{"path": ".env", "format": "dotenv", "mode": "plain", "keys": []any{map[string]any{"key": "A", "required": true}}}}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{map[string]any{"path": ".env", "format": "dotenv", "mode": "secret", "keys": []any{map[string]any{"key": "A"}}}}}, false},
		{SaveEnvFiles, map[string]any{"files": []any{map[string]any{"path": ".env", "format": "dotenv", "mode": "secret", "keys": []any{map[string]any{"key": "A", "required": true, "value": "hunter2"}}}}}, false},

		{RequestEnvVariables, map[string]any{"keys": []any{map[string]any{"key": "OPENAI_API_KEY", "type": "secret", "required": true, "description": "for the app", "suggestions": []any{map[string]any{"label": "Use test key", "value": "sk-test", "instructions": "from the dashboard"}}}}}, true},
		{RequestEnvVariables, map[string]any{"keys": []any{map[string]any{"key": "PORT"}}}, true},
		{RequestEnvVariables, map[string]any{"keys": []any{}}, false},
		{RequestEnvVariables, map[string]any{"keys": []any{map[string]any{"key": "PORT", "type": "file"}}}, false},
		{RequestEnvVariables, map[string]any{"keys": []any{map[string]any{"key": "1PORT"}}}, false},
		{RequestEnvVariables, map[string]any{"keys": []any{map[string]any{"key": "PORT", "suggestions": []any{map[string]any{"value": "1"}}}}}, false},
		{RequestEnvVariables, map[string]any{}, false},
	}
	for i, c := range cases {
		raw, _ := json.Marshal(c.args)
		_, err := Parse(c.tool, raw)
		if c.valid && err != nil {
			t.Errorf("%d %s %s: %v", i, c.tool, raw, err)
		}
		if !c.valid && (err == nil || !errors.Is(err, ErrInvalid)) {
			t.Errorf("%d %s %s: accepted", i, c.tool, raw)
		}
	}
}

func TestParseDefaultsAndSize(t *testing.T) {
	v, err := Parse(Verify, json.RawMessage(`{}`))
	if err != nil || v.(VerifyArgs).Folder != DefaultVerifyFolder {
		t.Errorf("verify default: %+v %v", v, err)
	}
	f, err := Parse(SaveEnvFiles, json.RawMessage(`{"files":[{"path":".env","format":"dotenv","mode":"secret","keys":[{"key":"A","required":false}]}]}`))
	if err != nil || f.(EnvFilesArgs).Files[0].WorkspacePath != "." {
		t.Errorf("env files default: %+v %v", f, err)
	}
	if _, err := Parse(SaveSnapshot, json.RawMessage(`{"message":"`+strings.Repeat("a", MaxArgsBytes)+`"}`)); err == nil {
		t.Error("oversized arguments accepted")
	}
	if _, err := Parse(SaveSnapshot, json.RawMessage(`{"message":`)); err == nil {
		t.Error("broken JSON accepted")
	}
	if _, err := Parse("nope", nil); err == nil {
		t.Error("unknown tool parsed")
	}
}

func TestUploadPrefix(t *testing.T) {
	a := UploadPrefix("s1", Verify, "call/../../x")
	if strings.Contains(a, "..") || !strings.HasPrefix(a, "sessions/s1/tools/verify/") || !strings.HasSuffix(a, "/") {
		t.Errorf("prefix %q", a)
	}
	if a == UploadPrefix("s1", Verify, "call-2") || a == UploadPrefix("s2", Verify, "call/../../x") {
		t.Error("prefixes of different calls collide")
	}
}
