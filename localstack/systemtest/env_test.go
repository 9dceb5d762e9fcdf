package systemtest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/session"
)

// envFileOf reads the env file of the first sandbox of session id.
func (s *stack) envFileOf(id string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(s.work, "sandboxes", id+"-1.tmp", ".proliferate_env.json"))
	if err != nil {
		return nil, err
	}
	var env map[string]string
	err = json.Unmarshal(raw, &env)
	return env, err
}

// A user's env submission says per key whether the value persists (and
// saveToConfiguration for keys that do not say): every value reaches the
// session's env file, and the persisted ones, sealed in the bucket, are in the
// env file of the next session of the same configuration before it is ready.
// No value is in an event, a log or a table.
func TestPersistedEnvReachesLaterSessionsOfTheConfiguration(t *testing.T) {
	t.Parallel()
	s := start(t, withSandboxEnv("RA_NO_TMUX=1"))
	body := createBody("Hello")
	body["configuration_id"] = "demo-web"
	first := s.create(body)
	if first.status != http.StatusOK {
		t.Fatalf("create: %d %s", first.status, first.raw)
	}
	id, tok := first.str("agent_id"), first.str("session_token")
	envURL := "/api/remote_agents/" + id + "/env"

	// Bad shapes are refused at the edge, in the error envelope.
	for _, bad := range []any{
		map[string]any{"secrets": []any{map[string]any{"key": "A", "value": "x", "persist": "yes"}}},
		map[string]any{"values": map[string]string{"A": "x"}, "saveToConfiguration": "true"},
		map[string]any{"secrets": map[string]any{"A": "x"}},
		map[string]any{"secrets": []any{map[string]any{"key": "A", "value": "x", "keep": true}}},
		map[string]any{"secrets": []any{map[string]any{"key": "A", "value": "x"}}, "values": map[string]string{"A": "y"}},
		map[string]any{"saveToConfiguration": true},
	} {
		wantError(t, s.call(http.MethodPost, envURL, tok, bad), 400, "invalid_request")
	}

	sub := s.call(http.MethodPost, envURL, tok, map[string]any{
		"secrets": []any{
			map[string]any{"key": "STRIPE_KEY", "value": "sk_live_persisted_1", "persist": true},
			map[string]any{"key": "DB_PASSWORD", "value": "pw_session_only_1", "persist": false},
			map[string]any{"key": "API_TOKEN", "value": "tk_fallback_1"},
		},
		"values":              map[string]string{"REGION": "rg_fallback_1"},
		"saveToConfiguration": true,
	})
	if sub.status != http.StatusOK || sub.str("status") != "submitted" || strings.Join(toStrings(sub.body["persisted"]), ",") != "API_TOKEN,REGION,STRIPE_KEY" {
		t.Fatalf("submit env: %d %s", sub.status, sub.raw)
	}
	eventually(t, 10*time.Second, "the first session's env file", func() bool {
		env, err := s.envFileOf(id)
		return err == nil && len(env) == 4 && env["DB_PASSWORD"] == "pw_session_only_1"
	})

	// The next session of the configuration starts with the persisted values.
	second := s.create(body)
	if second.status != http.StatusOK {
		t.Fatalf("create: %d %s", second.status, second.raw)
	}
	id2 := second.str("agent_id")
	env, err := s.envFileOf(id2)
	if err != nil || len(env) != 3 || env["STRIPE_KEY"] != "sk_live_persisted_1" || env["API_TOKEN"] != "tk_fallback_1" || env["REGION"] != "rg_fallback_1" {
		t.Errorf("the next session's env file when ready: %v %v", env, err)
	}
	// A session of no configuration has nothing persisted to get, nor to persist.
	scratch := s.create(createBody("Hello"))
	if env, err := s.envFileOf(scratch.str("agent_id")); !os.IsNotExist(err) {
		t.Errorf("a scratch session's env file: %v %v", env, err)
	}
	wantError(t, s.call(http.MethodPost, "/api/remote_agents/"+scratch.str("agent_id")+"/env", scratch.str("session_token"),
		map[string]any{"secrets": []any{map[string]any{"key": "A", "value": "x", "persist": true}}}), 400, "invalid_request")

	// Sealed at rest: written with server-side encryption.
	obj, err := awsconfig.NewS3(s.srv.Env.AWS).GetObject(t.Context(), &s3.GetObjectInput{
		Bucket: aws.String(s.srv.Env.Resources.Bucket.Name), Key: aws.String(session.ConfigurationEnvKey(devserver.DevTenant, "demo-web")),
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = obj.Body.Close()
	if obj.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Errorf("persisted values written with encryption %q, want AES256", obj.ServerSideEncryption)
	}

	// No value in the events, the logs (the server's and the sandboxes'), or
	// the configuration's registry item.
	values := []string{"sk_live_persisted_1", "pw_session_only_1", "tk_fallback_1", "rg_fallback_1"}
	for _, sid := range []string{id, id2} {
		evs, err := s.srv.Env.SessionStore().Events(t.Context(), sid, 0, 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			raw, _ := json.Marshal(e.Data)
			for _, v := range values {
				if strings.Contains(string(raw), v) {
					t.Errorf("a value is in an event of %s: %s %s", sid, e.Type, raw)
				}
			}
		}
	}
	cfg, err := s.srv.Env.Registry().Configuration(t.Context(), devserver.DevTenant, "demo-web")
	if err != nil {
		t.Fatal(err)
	}
	rawCfg, _ := json.Marshal(cfg)
	logs, _ := filepath.Glob(filepath.Join(s.work, "sandboxes", "*.log"))
	texts := map[string]string{"the server's logs": s.logs.String(), "the configuration": string(rawCfg)}
	for _, l := range logs {
		raw, _ := os.ReadFile(l)
		texts[l] = string(raw)
	}
	for where, text := range texts {
		for _, v := range values {
			if strings.Contains(text, v) {
				t.Errorf("%s hold a submitted value", where)
			}
		}
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
