package dynamo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/session"
)

// sessionFixture is a session item with every attribute set, as the
// sessions table held it before the domain type and the record were two
// types: session.Session marshalled whole by the table's encoder (DynamoDB
// JSON, as the console and the CLI show an item).
const sessionFixture = "testdata/session_item.json"

// TestSessionItemReadsTodaysItems reads an item in the table's format,
// checks the session the domain gets, and writes it back: every attribute
// comes out with the name and the encoding it went in with.
func TestSessionItemReadsTodaysItems(t *testing.T) {
	raw, err := os.ReadFile(sessionFixture)
	if err != nil {
		t.Fatal(err)
	}
	item, err := decodeItemJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var it sessionItem
	if err := unmarshal(item, &it); err != nil {
		t.Fatal(err)
	}
	s := it.session()
	created := time.Date(2026, 11, 28, 9, 30, 0, 123456789, time.UTC)
	switch {
	case s.ID != "5b0c6f8e-6a7a-4d4c-9d5e-1f2a3b4c5d6e" || s.State != session.Working || s.Generation != 2:
		t.Errorf("identity: %q %s %d", s.ID, s.State, s.Generation)
	case !s.CreatedAt.Equal(created) || !s.HeartbeatAt.Equal(created.Add(time.Minute)) || !s.EndedAt.IsZero():
		t.Errorf("times: created %s, heartbeat %s, ended %s", s.CreatedAt, s.HeartbeatAt, s.EndedAt)
	case len(s.TokenHashes) != 2 || s.SandboxTokenHash == "" || !s.BootstrapExpires.Equal(time.UnixMilli(1764322800000)):
		t.Errorf("tokens: %v %q %s", s.TokenHashes, s.SandboxTokenHash, s.BootstrapExpires)
	case s.Workspace == nil || s.Workspace.RepoSource.Type != "fixed" || s.AppLimits == nil || s.AppLimits.MaxCostUSD != 2.5:
		t.Errorf("workspace %+v, app limits %+v", s.Workspace, s.AppLimits)
	case s.Usage() != session.Usage{InputTokens: 1200, OutputTokens: 340, CachedTokens: 800, Calls: 3, CostMicroUSD: 4567, CostUSD: 0.004567}:
		t.Errorf("usage %+v", s.Usage())
	case !s.Streams["st-1"].Equal(time.UnixMilli(1764322260000)) || s.Resources == nil || s.Resources.MemoryMB != 512:
		t.Errorf("streams %v, resources %+v", s.Streams, s.Resources)
	case !s.DueAt.Equal(time.UnixMilli(1764322320000)):
		t.Errorf("due at %s", s.DueAt)
	}
	back, err := marshalMap(newSessionItem(s))
	if err != nil {
		t.Fatal(err)
	}
	got, want := itemJSON(t, back), itemJSON(t, item)
	if !bytes.Equal(got, want) {
		t.Errorf("written back:\n%s\nwant:\n%s", got, want)
	}
}

// itemJSON is item in DynamoDB JSON, attributes in order.
func itemJSON(t *testing.T, item map[string]types.AttributeValue) []byte {
	t.Helper()
	out, err := json.MarshalIndent(avJSON(&types.AttributeValueMemberM{Value: item}).(map[string]any)["M"], "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// avJSON is v in DynamoDB JSON's form ({"S": "…"}, {"N": "…"}, …).
func avJSON(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = avJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, e := range v.Value {
			m[k] = avJSON(e)
		}
		return map[string]any{"M": m}
	}
	return map[string]any{"unsupported": fmt.Sprintf("%T", v)}
}

// decodeItemJSON reads an item in DynamoDB JSON.
func decodeItemJSON(raw []byte) (map[string]types.AttributeValue, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode item: %w", err)
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, r := range m {
		v, err := decodeAV(r)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func decodeAV(raw json.RawMessage) (types.AttributeValue, error) {
	var one map[string]json.RawMessage
	if err := json.Unmarshal(raw, &one); err != nil || len(one) != 1 {
		return nil, fmt.Errorf("want one type key in %s", raw)
	}
	keys := make([]string, 0, 1)
	for k := range one {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r := one[keys[0]]
	switch keys[0] {
	case "S", "N":
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return nil, err
		}
		if keys[0] == "S" {
			return &types.AttributeValueMemberS{Value: s}, nil
		}
		return &types.AttributeValueMemberN{Value: s}, nil
	case "BOOL", "NULL":
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			return nil, err
		}
		if keys[0] == "BOOL" {
			return &types.AttributeValueMemberBOOL{Value: b}, nil
		}
		return &types.AttributeValueMemberNULL{Value: b}, nil
	case "SS", "NS":
		var ss []string
		if err := json.Unmarshal(r, &ss); err != nil {
			return nil, err
		}
		if keys[0] == "SS" {
			return &types.AttributeValueMemberSS{Value: ss}, nil
		}
		return &types.AttributeValueMemberNS{Value: ss}, nil
	case "L":
		var l []json.RawMessage
		if err := json.Unmarshal(r, &l); err != nil {
			return nil, err
		}
		out := make([]types.AttributeValue, len(l))
		for i, e := range l {
			v, err := decodeAV(e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case "M":
		m, err := decodeItemJSON(r)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unknown type %s", keys[0])
}
