package toolspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Parse, for any tool and arguments: an error wraps ErrInvalid; arguments
// it accepts are of the tool's type, within MaxArgsBytes, with paths inside
// the workspace and env keys that are names; and their canonical encoding
// (what the gateway hashes and stores) is accepted again and encodes to
// itself, so a retried call is recognised as the same call.
func FuzzParse(f *testing.F) {
	seeds := map[string][]string{
		Verify:       {`{}`, `{"folder":"evidence/run 1"}`, `{"folder":"../x"}`, `null`, ``},
		SaveSnapshot: {`{"message":"done"}`, `{"message":1}`},
		AutomationComplete: {`{"run_id":"r","completion_id":"c","outcome":"succeeded","summary_markdown":"# ok","citations":["a"],"diff_ref":"d",` +
			`"test_report_ref":"t","side_effect_refs":["s"]}`, `{"run_id":"r","completion_id":"c","outcome":"maybe"}`},
		SaveServiceCommands: {`{"commands":[{"name":"web","command":"npm start","cwd":"app","workspacePath":"repo"}]}`, `{"commands":[{"name":" ","command":"x"}]}`},
		SaveEnvFiles:        {`{"files":[{"path":".env","format":"dotenv","mode":"secret","keys":[{"key":"A_B","required":true}]}]}`, `{"files":[{"path":"/etc/x","format":"dotenv","mode":"secret","keys":[{"key":"1","required":true}]}]}`},
		RequestEnvVariables: {`{"keys":[{"key":"API_KEY","description":"d","type":"secret","required":false,"suggestions":[{"label":"l","value":"v","instructions":"i"}]}]}`,
			`{"keys":[{"key":"A","KEY":"B"}]}`, `{"keys":[{"key":"A","key":"1"}]}`},
	}
	for name, bodies := range seeds {
		for _, b := range bodies {
			f.Add(name, b)
		}
	}
	f.Add(AutomationCompleteAlias, `{"run_id":"r","completion_id":"c","outcome":"failed"}`)
	f.Add("bash", `{}`)
	f.Fuzz(func(t *testing.T, name, raw string) {
		args, err := Parse(name, json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		d, _ := Lookup(name)
		if len(raw) > MaxArgsBytes {
			t.Fatalf("accepted %d bytes", len(raw))
		}
		switch a := args.(type) {
		case VerifyArgs:
			mustBeRelative(t, a.Folder)
		case ServiceCommandsArgs:
			for _, c := range a.Commands {
				if strings.TrimSpace(c.Name) == "" || strings.TrimSpace(c.Command) == "" {
					t.Fatalf("accepted command %+v", c)
				}
				for _, p := range []string{c.Cwd, c.WorkspacePath} {
					if p != "" {
						mustBeRelative(t, p)
					}
				}
			}
		case EnvFilesArgs:
			for _, file := range a.Files {
				mustBeRelative(t, file.Path)
				mustBeRelative(t, file.WorkspacePath)
				for _, k := range file.Keys {
					if !envKey.MatchString(k.Key) {
						t.Fatalf("accepted key %q", k.Key)
					}
				}
			}
		case RequestEnvArgs:
			for _, k := range a.Keys {
				if !envKey.MatchString(k.Key) {
					t.Fatalf("accepted key %q", k.Key)
				}
			}
		case SnapshotArgs, CompleteArgs:
		default:
			t.Fatalf("%s: arguments of type %T", d.Name, args)
		}
		canon, err := json.Marshal(args)
		if err != nil {
			t.Fatalf("encode %+v: %v", args, err)
		}
		again, err := Parse(name, canon)
		if err != nil || reflect.TypeOf(again) != reflect.TypeOf(args) {
			t.Fatalf("canonical %s of %q parses as %+v, %v; want %+v", canon, raw, again, err, args)
		}
		if twice, _ := json.Marshal(again); !bytes.Equal(twice, canon) {
			t.Fatalf("canonical form %s is not stable: %s", canon, twice)
		}
	})
}

func mustBeRelative(t *testing.T, p string) {
	t.Helper()
	if p == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.ContainsAny(p, "\\\x00") || strings.Contains("/"+p+"/", "/../") {
		t.Fatalf("accepted path %q", p)
	}
}
