// Package secretstest is the contract of a secrets.Store, run against
// every implementation.
package secretstest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/remote-agents/remote-agents/shared/secrets"
)

// Run checks a fresh store from newStore.
func Run(t *testing.T, newStore func(t *testing.T) secrets.Store) {
	t.Helper()
	st := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	gh := secrets.Stored{Secret: secrets.Secret{Name: "github", CreatedAt: at, UpdatedAt: at,
		Inject: []secrets.Rule{{Host: "github.com", Header: "Authorization", Format: "{{basic:x-access-token}}"}}}, Value: "ghp_one"}
	if _, err := st.Get(ctx, "t1", "github"); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Get before Put: %v, want ErrNotFound", err)
	}
	if err := st.Put(ctx, "t1", gh); err != nil {
		t.Fatal(err)
	}
	api := secrets.Stored{Secret: secrets.Secret{Name: "api", CreatedAt: at, UpdatedAt: at,
		Inject: []secrets.Rule{{Host: "api.example.com", PathPrefix: "/v1/", Header: "X-Api-Key", Format: "{{value}}"}}}, Value: "k"}
	if err := st.Put(ctx, "t1", api); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "t10", api); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "t1", "github")
	if err != nil || !reflect.DeepEqual(got, gh) {
		t.Fatalf("Get = %+v, %v; want %+v", got, err, gh)
	}
	// Rotation replaces the value.
	gh.Value, gh.UpdatedAt = "ghp_two", at.Add(time.Hour)
	if err := st.Put(ctx, "t1", gh); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Get(ctx, "t1", "github"); got.Value != "ghp_two" || !got.UpdatedAt.Equal(gh.UpdatedAt) {
		t.Errorf("after rotation: %+v", got)
	}
	list, err := st.List(ctx, "t1")
	if err != nil || len(list) != 2 || list[0].Name != "api" || list[1].Name != "github" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if other, _ := st.Get(ctx, "t2", "github"); other.Value != "" {
		t.Error("another tenant read t1's secret")
	}
	if err := st.Delete(ctx, "t1", "github"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "t1", "github"); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if list, _ := st.List(ctx, "t1"); len(list) != 1 {
		t.Errorf("List after Delete = %+v", list)
	}
}
