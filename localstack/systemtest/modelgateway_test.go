package systemtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/remote-agents/remote-agents/localstack/devserver"
	"github.com/remote-agents/remote-agents/sandbox/llm"
	"github.com/remote-agents/remote-agents/sandbox/providers"
	"github.com/remote-agents/remote-agents/sandbox/providers/providertest"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// platformKeys are the keys the dev server's model gateway holds: those the
// wire-format servers of providertest take.
var platformKeys = map[string]string{
	"ANTHROPIC_API_KEY": "test-key", "OPENAI_API_KEY": "test-key", "MISTRAL_API_KEY": "mistral-key", "GEMINI_API_KEY": "gemini-key",
}

// withModels sends the gateway's calls to upstreams (by provider) with
// platformKeys, and reports what it meters to met.
func withModels(upstreams map[string]string, met *meter) option {
	return func(o *devserver.Options) {
		for p, u := range upstreams {
			o.Config.Model.Upstreams[p] = u
		}
		o.ModelKeys = func(name string) (string, bool) { v, ok := platformKeys[name]; return v, ok }
		if met != nil {
			o.Metered = met.add
		}
	}
}

// meter hears the usage the gateway records, call by call.
type meter struct {
	mu    sync.Mutex
	calls map[string][]session.Usage
	added chan struct{}
}

func newMeter() *meter {
	return &meter{calls: map[string][]session.Usage{}, added: make(chan struct{}, 1)}
}

func (m *meter) add(id string, u session.Usage) {
	m.mu.Lock()
	m.calls[id] = append(m.calls[id], u)
	m.mu.Unlock()
	select {
	case m.added <- struct{}{}:
	default:
	}
}

// wait returns the session's metered calls once there are n of them.
func (m *meter) wait(t *testing.T, id string, n int) []session.Usage {
	t.Helper()
	fail := time.After(30 * time.Second) // a bound against hanging, not a timing check
	for {
		m.mu.Lock()
		got := append([]session.Usage(nil), m.calls[id]...)
		m.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-m.added:
		case <-fail:
			t.Fatalf("%d calls of %s metered, want %d", len(got), id, n)
		}
	}
}

// TestProviderContractThroughTheGateway runs the provider contract suite with
// each provider's real SDK pointed at the dev server's model route (the
// sandbox token as its key), whose gateway calls the provider's wire-format
// server with the platform's key (Bedrock: signed with the platform's AWS
// credentials): every scenario, streams included, behaves as when called
// directly, and the usage recorded on the session is what the server sent.
func TestProviderContractThroughTheGateway(t *testing.T) {
	t.Parallel()
	servers := map[string]*providertest.Server{
		"anthropic": providertest.NewServer(t, providertest.Anthropic(t)),
		"openai":    providertest.NewServer(t, providertest.OpenAI(t)),
		"mistral":   providertest.NewServer(t, providertest.Mistral(t)),
		"gemini":    providertest.NewServer(t, providertest.Gemini(t)),
		"bedrock":   providertest.NewServer(t, providertest.Bedrock(t)),
	}
	upstreams := map[string]string{}
	for p, srv := range servers {
		upstreams[p] = srv.URL
	}
	upstreams["mistral"] += "/v1"
	met := newMeter()
	s := start(t, withModels(upstreams, met))
	builds := map[string]func(o providers.Options) llm.Provider{
		"anthropic": func(o providers.Options) llm.Provider {
			o.Model = "claude-sonnet-4.5"
			return providers.NewAnthropic(o)
		},
		"openai":  func(o providers.Options) llm.Provider { o.Model = "claude-sonnet-4.5"; return providers.NewOpenAI(o) },
		"mistral": func(o providers.Options) llm.Provider { o.Model = "mistral-large"; return providers.NewMistral(o) },
		"gemini": func(o providers.Options) llm.Provider {
			o.Model = "gemini-2.5-pro"
			p, err := providers.NewGemini(o)
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		"bedrock": func(o providers.Options) llm.Provider {
			o.Model = "claude-sonnet-4.5"
			return providers.NewBedrock(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(o.BaseURL)}, o)
		},
	}
	for provider, srv := range servers {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			id, _, sb := s.storedAgent(t)
			base := sandboxwire.ModelBaseURL(s.srv.URL, id, provider)
			tally := srv.Run(t, func(o providers.Options) llm.Provider {
				o.BaseURL, o.APIKey = base, sb
				return builds[provider](o)
			})
			calls := met.wait(t, id, tally.Calls)
			var sum session.Usage
			for _, u := range calls {
				sum.InputTokens += u.InputTokens
				sum.OutputTokens += u.OutputTokens
				sum.Calls += u.Calls
			}
			want := session.Usage{InputTokens: int64(tally.Usage.InputTokens), OutputTokens: int64(tally.Usage.OutputTokens), Calls: int64(tally.Calls)}
			if sum != want {
				t.Errorf("metered %+v over %d calls, the server sent %+v", sum, len(calls), want)
			}
			got, err := s.srv.Env.SessionStore().Get(t.Context(), id)
			// The tokens as metered; their cost is the price table's (none
			// for a model it does not list).
			u := got.Usage()
			if err != nil || u.CostMicroUSD < 0 || u.CostUSD != float64(u.CostMicroUSD)/1e6 {
				t.Errorf("session usage %+v, %v", u, err)
			}
			u.CostMicroUSD, u.CostUSD = 0, 0
			if u != want {
				t.Errorf("session usage %+v; want %+v", u, want)
			}
		})
	}
}

// TestModelRouteRefusals: only the session's own sandbox may call its model
// route: not its session token (an embed viewer's), not another session's
// sandbox token, not once the session has ended; a provider the gateway does
// not know and an operation other than a model call are 404. None of them
// reaches the provider.
func TestModelRouteRefusals(t *testing.T) {
	t.Parallel()
	reached := make(chan string, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"output_tokens":1}}`)
	}))
	t.Cleanup(up.Close)
	s := start(t, withModels(map[string]string{"anthropic": up.URL, "openai": up.URL}, nil))
	id, tok, sb := s.storedAgent(t)
	_, _, otherSB := s.storedAgent(t)
	const body = `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	messages := "/sandbox/" + id + "/model/anthropic/v1/messages"
	wantError(t, s.call(http.MethodPost, messages, tok, body), http.StatusForbidden, "forbidden")
	wantError(t, s.call(http.MethodPost, messages, "", body, "X-Api-Key", tok), http.StatusForbidden, "forbidden")
	wantError(t, s.call(http.MethodPost, messages, otherSB, body), http.StatusUnauthorized, "invalid_token")
	wantError(t, s.call(http.MethodPost, messages, "", body), http.StatusUnauthorized, "missing_token")
	wantError(t, s.call(http.MethodPost, "/sandbox/"+id+"/model/ollama/v1/chat/completions", sb, body), http.StatusNotFound, "not_found")
	wantError(t, s.call(http.MethodPost, "/sandbox/"+id+"/model/anthropic/v1/files", sb, body), http.StatusNotFound, "not_found")
	wantError(t, s.call(http.MethodPost, "/sandbox/"+id+"/model/openai/files", sb, body), http.StatusNotFound, "not_found")
	wantError(t, s.call(http.MethodGet, messages, sb, nil), http.StatusMethodNotAllowed, "method_not_allowed")
	select {
	case p := <-reached:
		t.Fatalf("a refused call reached the provider: %s", p)
	default:
	}
	// The session's own sandbox may, until its session ends.
	if r := s.call(http.MethodPost, messages, sb, body); r.status != http.StatusOK || r.body["type"] != "message" {
		t.Fatalf("the sandbox's own call: %d %s", r.status, r.raw)
	}
	if p := <-reached; p != "/v1/messages" {
		t.Errorf("the provider got %s", p)
	}
	if r := s.shutdown(id, tok); r.str("status") != "shutdown_initiated" {
		t.Fatalf("shutdown: %s", r.raw)
	}
	if r := s.call(http.MethodPost, "/sandbox/"+id+"/status", sb, map[string]any{"state": "ended"}); r.status != http.StatusOK {
		t.Fatalf("ended: %d %s", r.status, r.raw)
	}
	wantError(t, s.call(http.MethodPost, messages, sb, body), http.StatusUnauthorized, "invalid_token")
	select {
	case p := <-reached:
		t.Errorf("a call of an ended session reached the provider: %s", p)
	default:
	}
}

// TestAgentTalksThroughTheModelGateway: a real agent, given a hosted
// provider and no key, answers through the dev server's model gateway, which
// puts the platform's key on its calls; alive shows what it used.
func TestAgentTalksThroughTheModelGateway(t *testing.T) {
	t.Parallel()
	type call struct{ key, auth, path string }
	calls := make(chan call, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		calls <- call{r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.URL.Path}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the model."}],"stop_reason":"end_turn","usage":{"input_tokens":120,"output_tokens":7,"cache_read_input_tokens":100}}`)
			return
		}
		// The agent streams its replies: the same answer as Anthropic's
		// Messages API streams it.
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`message_start`, `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":120,"output_tokens":1,"cache_read_input_tokens":100}}}`,
			`content_block_start`, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from "}}`,
			`content_block_delta`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the model."}}`,
			`content_block_stop`, `{"type":"content_block_stop","index":0}`,
			`message_delta`, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}`,
			`message_stop`, `{"type":"message_stop"}`,
		} {
			if strings.HasPrefix(ev, "{") {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			} else {
				fmt.Fprintf(w, "event: %s\n", ev)
			}
		}
	}))
	t.Cleanup(up.Close)
	s := start(t, withModels(map[string]string{"anthropic": up.URL}, nil), func(o *devserver.Options) {
		o.SandboxEnv = []string{"RA_LLM_PROVIDER=anthropic", "RA_NO_TMUX=1"}
	})
	id, tok := s.mustCreate()
	var reply string
	eventually(t, 20*time.Second, "the agent's answer", func() bool {
		evs, _ := s.srv.Env.SessionStore().Events(t.Context(), id, 0, 100)
		for _, e := range evs {
			if text, _ := e.Data["text"].(string); e.Type == sandboxwire.TypeAgentMessage && strings.Contains(text, "Hello from the model.") {
				reply = text
			}
		}
		return reply != ""
	})
	c := <-calls
	if c.path != "/v1/messages" || c.key != "test-key" || c.auth != "" {
		t.Errorf("the provider got %+v, want the platform's key only", c)
	}
	r := s.alive(id, tok)
	usage, _ := r.body["usage"].(map[string]any)
	if usage["input_tokens"] != float64(220) || usage["output_tokens"] != float64(7) || usage["cached_tokens"] != float64(100) || usage["calls"] != float64(1) {
		t.Errorf("alive: %s", r.raw)
	}
}
