package apitest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// Differences finds a field one side has and the other has not, at any
// depth, and a field whose kind differs; free-form values match anything.
func TestBodyDifferences(t *testing.T) {
	type inner struct {
		A string `json:"a"`
	}
	type base struct {
		ID string `json:"id"`
	}
	type served struct {
		base
		Name   string            `json:"name,omitempty"`
		At     time.Time         `json:"at"`
		Items  []inner           `json:"items"`
		Free   json.RawMessage   `json:"free"`
		Labels map[string]string `json:"labels"`
		Skip   string            `json:"-"`
		hidden string
	}
	type doc struct {
		ID     string            `json:"id"`
		Name   *string           `json:"name,omitempty,omitzero"`
		At     string            `json:"at"`
		Items  []inner           `json:"items"`
		Free   map[string]any    `json:"free"`
		Labels map[string]string `json:"labels"`
	}
	type docDeep struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		At    string `json:"at"`
		Items []struct {
			B string `json:"b"`
		} `json:"items"`
		Free   []int          `json:"free"`
		Labels map[string]int `json:"labels"`
		Extra  bool           `json:"extra"`
	}
	_ = served{}.hidden
	if got := BodyOf[served, doc]().Differences(); len(got) != 0 {
		t.Errorf("same JSON: %q", got)
	}
	got := BodyOf[served, docDeep]().Differences()
	want := []string{
		"apitest.served.extra: in the document only",
		"apitest.served.items[].a: not in the document",
		"apitest.served.items[].b: in the document only",
		"apitest.served.labels{}: string (string), the document has number (int)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
