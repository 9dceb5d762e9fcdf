package stack

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/routes"
)

// The push channel: a WebSocket API whose $connect and $disconnect go to the
// sandbox function, on a logged stage; its @connections endpoint and
// execute-api:ManageConnections for the functions that push (access.Push)
// only; its URL for the workers that launch sandboxes.
func TestPushChannel(t *testing.T) {
	tp := synth(t)["dev"]
	apis := map[string]bool{}
	for id, r := range tp.byType("AWS::ApiGatewayV2::Api") {
		if props(r)["ProtocolType"] == "WEBSOCKET" {
			apis[id] = true
		}
	}
	if len(apis) != 1 {
		t.Fatalf("WebSocket APIs: %v, want one", apis)
	}
	fnNames := map[string]string{}
	for id, r := range tp.byType("AWS::Lambda::Function") {
		if name, ok := props(r)["FunctionName"].(string); ok {
			fnNames[id] = name
		}
	}
	integrations := map[string]string{}
	for id, r := range tp.byType("AWS::ApiGatewayV2::Integration") {
		uri := mustJSON(t, props(r)["IntegrationUri"])
		for fnID, name := range fnNames {
			if strings.Contains(uri, `"`+fnID+`"`) {
				integrations[id] = name
			}
		}
	}
	served := map[string]string{}
	for _, r := range tp.byType("AWS::ApiGatewayV2::Route") {
		p := props(r)
		if !apis[ref(p["ApiId"])] {
			continue
		}
		target := p["Target"].(map[string]any)["Fn::Join"].([]any)[1].([]any)
		served[p["RouteKey"].(string)] = integrations[ref(target[1])]
	}
	want := map[string]string{}
	for _, r := range routes.Sockets() {
		want[r.Key] = "ra-dev-" + r.Function
	}
	if b1, b2 := mustJSON(t, served), mustJSON(t, want); b1 != b2 {
		t.Errorf("push routes %s, want %s", b1, b2)
	}
	stages := 0
	for _, r := range tp.byType("AWS::ApiGatewayV2::Stage") {
		p := props(r)
		if !apis[ref(p["ApiId"])] {
			continue
		}
		stages++
		if p["StageName"] != PushStage || p["AccessLogSettings"] == nil || p["DefaultRouteSettings"] == nil {
			t.Errorf("push stage %v", p)
		}
	}
	if stages != 1 {
		t.Errorf("%d push stages, want 1", stages)
	}

	grants := tp.stack.Grants()
	for _, r := range tp.byType("AWS::Lambda::Function") {
		p := props(r)
		name, _ := p["FunctionName"].(string)
		if name == "" {
			continue
		}
		fn := strings.TrimPrefix(name, "ra-dev-")
		manage := false
		for _, st := range tp.statements(ref(p["Role"])) {
			if !slices.Contains(list(st["Action"]), "execute-api:ManageConnections") {
				continue
			}
			manage = true
			if res := mustJSON(t, st["Resource"]); !strings.Contains(res, "/"+PushStage+"/POST/@connections/*") {
				t.Errorf("%s manages connections on %s", fn, res)
			}
		}
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		_, endpoint := vars["RA_PUSH_ENDPOINT"]
		if pushes := grants[fn].Push; manage != pushes || endpoint != pushes {
			t.Errorf("%s: ManageConnections %v, RA_PUSH_ENDPOINT %v; pushes %v", fn, manage, endpoint, pushes)
		}
		// The launchers pass it on to sandboxes; the embed page hands it to
		// its viewers.
		_, url := vars["RA_PUSH_URL"]
		if wants := fn == routes.JobWorker || fn == ToolWorker || fn == "embed"; url != wants {
			t.Errorf("%s: RA_PUSH_URL %v", fn, url)
		}
	}
	// Whoever appends an agent's events pushes them to its viewers: the
	// sandbox's (and serves its viewers), the messages', the ends'.
	for _, fn := range []string{"messages", "shutdown", "sandbox", "alive", "model", "toolcallback", "fleet"} {
		if !grants[fn].Push {
			t.Errorf("%s does not push", fn)
		}
	}
}

// ofHTTPAPI returns the resources of typ (an API, or a stage) of the HTTP
// API, not the push channel's WebSocket API.
func (tp *template) ofHTTPAPI(typ string) map[string]map[string]any {
	out := tp.byType(typ)
	for id, r := range out {
		api := id
		if typ != "AWS::ApiGatewayV2::Api" {
			api = ref(props(r)["ApiId"])
		}
		if props(tp.res[api])["ProtocolType"] != "HTTP" {
			delete(out, id)
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
