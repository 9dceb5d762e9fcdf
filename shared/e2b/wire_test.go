package e2b_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/e2b"
)

// The list's metadata filter as the SDKs send it: each key and value
// encoded, joined as a query, encoded again, and encoded as this query's
// value (here by url.Values, as the SDK's HTTP client does).
func TestListFilterDecodesTheSDKsMetadata(t *testing.T) {
	t.Parallel()
	md := map[string]string{"k 1": "v&1", "user": "a=b%c"}
	inner := url.Values{}
	for k, v := range md {
		inner.Set(url.QueryEscape(k), url.QueryEscape(v))
	}
	q := url.Values{"metadata": {inner.Encode()}, "state": {"running,paused"}, "limit": {"5"}, "nextToken": {"tok2"}}
	parsed, err := url.ParseQuery(q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	f, err := e2b.ParseListFilter(parsed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, md) || !reflect.DeepEqual(f.States, []string{"running", "paused"}) || f.Limit != 5 || f.NextToken != "tok2" {
		t.Errorf("parsed %+v", f)
	}
	if !f.Matches(map[string]string{"k 1": "v&1", "user": "a=b%c", "other": "x"}, "paused") || f.Matches(map[string]string{"k 1": "v&1"}, "running") {
		t.Error("matching by metadata")
	}
	for _, bad := range []url.Values{{"state": {"dead"}}, {"limit": {"0"}}, {"limit": {"101"}}, {"limit": {"5x"}}, {"metadata": {"%zz"}}} {
		if _, err := e2b.ParseListFilter(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if f, err := e2b.ParseListFilter(url.Values{}); err != nil || f.Limit != e2b.DefaultListLimit || f.States != nil {
		t.Errorf("no query: %+v %v", f, err)
	}
}

// Create's body as 2.45 and 2.51 send it.
func TestNewSandbox(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"templateID":"base","timeout":300,"secure":true,"allow_internet_access":true}`: "",
		`{"templateID":"base"}`: "",
		`{"templateID":"mytpl","metadata":{"k 1":"v&1"},"envVars":{"A":"b"},"timeout":60,"allow_internet_access":false,"autoPause":true,"autoResume":{"enabled":true}}`: "",
		`{"templateID":"../x"}`:                     "templateID",
		`{"templateID":"base","timeout":0}`:         "timeout",
		`{"templateID":"base","timeout":86401}`:     "timeout",
		`{"templateID":"base","envVars":{"1A":""}}`: "envVars",
	} {
		var n e2b.NewSandbox
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			t.Fatal(err)
		}
		if got := n.Problem(); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
	var n e2b.NewSandbox
	_ = json.Unmarshal([]byte(`{"templateID":"base"}`), &n)
	if n.LifeSeconds() != e2b.DefaultTimeout {
		t.Errorf("no timeout: %d", n.LifeSeconds())
	}
	if !e2b.ValidAPIKey("e2b_"+strings.Repeat("0a", 20)) || e2b.ValidAPIKey("e2b_XYZ") || e2b.ValidAPIKey("rak_"+strings.Repeat("0", 40)) {
		t.Error("API key shapes")
	}
}
