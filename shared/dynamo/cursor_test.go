package dynamo

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  map[string]types.AttributeValue
	}{
		{"string", map[string]types.AttributeValue{"session_id": &types.AttributeValueMemberS{Value: "s-1"}}},
		{"string and number", map[string]types.AttributeValue{
			"session_id": &types.AttributeValueMemberS{Value: "s-1"},
			"seq":        &types.AttributeValueMemberN{Value: "42"},
		}},
		{"binary", map[string]types.AttributeValue{"k": &types.AttributeValueMemberB{Value: []byte{0, 1, 2}}}},
	}
	for _, tt := range tests {
		c, err := encodeCursor(tt.key)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, err := decodeCursor(c)
		if err != nil {
			t.Fatalf("%s: decode: %v", tt.name, err)
		}
		if !reflect.DeepEqual(got, tt.key) {
			t.Errorf("%s: round trip gave %#v", tt.name, got)
		}
	}
	if c, err := encodeCursor(nil); c != "" || err != nil {
		t.Errorf("empty key: %q, %v", c, err)
	}
}

func TestDecodeCursorRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []Cursor{"!", "e30", "eyJrIjp7fX0", "eyJrIjp7IlMiOiJhIiwiTiI6IjEifX0", "bnVsbA"} {
		if _, err := decodeCursor(in); err == nil {
			t.Errorf("decodeCursor(%q) accepted", in)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add("eyJzZXNzaW9uX2lkIjp7IlMiOiJzLTEifX0")
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		key, err := decodeCursor(Cursor(s))
		if err != nil {
			return
		}
		c, err := encodeCursor(key)
		if err != nil {
			t.Fatalf("decoded key %v does not encode: %v", key, err)
		}
		again, err := decodeCursor(c)
		if err != nil || !reflect.DeepEqual(again, key) {
			t.Fatalf("re-decode of %q: %v, %v", c, again, err)
		}
	})
}
