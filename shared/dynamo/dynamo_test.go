package dynamo_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/localstack/awstest"
	"github.com/remote-agents/remote-agents/shared/awsconfig"
	"github.com/remote-agents/remote-agents/shared/dynamo"
	"github.com/remote-agents/remote-agents/shared/resources"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// session is a test item for the sessions table.
type session struct {
	ID        string `json:"session_id"`
	Project   string `json:"project_name,omitempty"`
	CreatedAt string `json:"created_at,omitempty"`
	State     string `json:"state"`
	Gen       int    `json:"generation"`
	ExpiresAt int64  `json:"expires_at,omitempty"`
}

func setup(t *testing.T) (resources.Set, *dynamodb.Client) {
	t.Helper()
	set, _ := awstest.Resources(t)
	return set, awsconfig.NewDynamoDB(awstest.Config(t))
}

func TestConditionalPutRejectsDuplicate(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	sessions := dynamo.NewTable(api, set.Sessions.Name)
	absent := expression.AttributeNotExists(expression.Name("session_id"))

	if err := sessions.Put(t.Context(), session{ID: "s1", State: "provisioning"}, absent); err != nil {
		t.Fatalf("first put: %v", err)
	}
	err := sessions.Put(t.Context(), session{ID: "s1", State: "ready"}, absent)
	if !errors.Is(err, dynamo.ErrConditionFailed) {
		t.Fatalf("duplicate put: got %v, want ErrConditionFailed", err)
	}
	var cf *dynamo.ConditionFailedError
	if !errors.As(err, &cf) {
		t.Fatalf("duplicate put: %T is not a *ConditionFailedError", err)
	}
	var old session
	if err := cf.Decode(&old); err != nil || old.State != "provisioning" {
		t.Errorf("item at failure = %+v, %v; want the first item", old, err)
	}
	var got session
	if err := sessions.Get(t.Context(), map[string]string{"session_id": "s1"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "provisioning" {
		t.Errorf("state after rejected put = %q, want provisioning", got.State)
	}
}

func TestConsistentReadAfterWriteAndNotFound(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	sessions := dynamo.NewTable(api, set.Sessions.Name)
	key := map[string]string{"session_id": "s2"}

	var got session
	if err := sessions.Get(t.Context(), key, &got); !errors.Is(err, dynamo.ErrNotFound) {
		t.Fatalf("get before put: %v, want ErrNotFound", err)
	}
	for gen := 1; gen <= 20; gen++ {
		if err := sessions.Put(t.Context(), session{ID: "s2", State: "ready", Gen: gen}); err != nil {
			t.Fatal(err)
		}
		if err := sessions.Get(t.Context(), key, &got); err != nil {
			t.Fatal(err)
		}
		if got.Gen != gen {
			t.Fatalf("read after write %d saw generation %d", gen, got.Gen)
		}
	}
}

func TestConditionalUpdate(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	sessions := dynamo.NewTable(api, set.Sessions.Name)
	key := map[string]string{"session_id": "s3"}
	if err := sessions.Put(t.Context(), session{ID: "s3", State: "provisioning", Gen: 1}); err != nil {
		t.Fatal(err)
	}
	toReady := expression.Set(expression.Name("state"), expression.Value("ready"))
	inState := func(s string) expression.ConditionBuilder {
		return expression.Name("state").Equal(expression.Value(s))
	}
	var after session
	if err := sessions.Update(t.Context(), key, toReady, &after, inState("provisioning")); err != nil {
		t.Fatalf("update: %v", err)
	}
	if after.State != "ready" || after.Gen != 1 {
		t.Errorf("updated item = %+v", after)
	}
	err := sessions.Update(t.Context(), key, toReady, nil, inState("provisioning"))
	if !errors.Is(err, dynamo.ErrConditionFailed) {
		t.Errorf("second transition: %v, want ErrConditionFailed", err)
	}
	if err := sessions.Delete(t.Context(), key, inState("ended")); !errors.Is(err, dynamo.ErrConditionFailed) {
		t.Errorf("conditional delete: %v, want ErrConditionFailed", err)
	}
	if err := sessions.Delete(t.Context(), key, inState("ready")); err != nil {
		t.Errorf("delete: %v", err)
	}
}

func TestTransactionWithFailingConditionWritesNothing(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	sessions := dynamo.NewTable(api, set.Sessions.Name)
	idem := dynamo.NewTable(api, set.Idempotency.Name)
	if err := idem.Put(t.Context(), map[string]string{"key": "create#k1", "session_id": "old"}); err != nil {
		t.Fatal(err)
	}
	absent := func(attr string) expression.ConditionBuilder {
		return expression.AttributeNotExists(expression.Name(attr))
	}
	err := dynamo.Transact(t.Context(), api, "",
		sessions.PutOp(session{ID: "s4", State: "provisioning"}, absent("session_id")),
		idem.PutOp(map[string]string{"key": "create#k1", "session_id": "s4"}, absent("key")),
	)
	if !errors.Is(err, dynamo.ErrConditionFailed) {
		t.Fatalf("transaction: %v, want ErrConditionFailed", err)
	}
	var canceled *dynamo.TxCanceledError
	if !errors.As(err, &canceled) || len(canceled.Reasons) != 2 || canceled.Reasons[1] != "ConditionalCheckFailed" {
		t.Errorf("cancellation reasons = %+v", canceled)
	}
	var got session
	if err := sessions.Get(t.Context(), map[string]string{"session_id": "s4"}, &got); !errors.Is(err, dynamo.ErrNotFound) {
		t.Errorf("session after canceled transaction: %+v, %v; want ErrNotFound", got, err)
	}

	// The same transaction with a fresh key commits both items.
	err = dynamo.Transact(t.Context(), api, "",
		sessions.PutOp(session{ID: "s4", State: "provisioning"}, absent("session_id")),
		idem.PutOp(map[string]string{"key": "create#k2", "session_id": "s4"}, absent("key")),
		idem.CheckOp(map[string]string{"key": "create#k1"}, expression.AttributeExists(expression.Name("key"))),
	)
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if err := sessions.Get(t.Context(), map[string]string{"session_id": "s4"}, &got); err != nil {
		t.Errorf("session after committed transaction: %v", err)
	}
}

func TestGSIQueryPagesWithoutLoadingEverything(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	sessions := dynamo.NewTable(api, set.Sessions.Name)
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 25 {
		project := "alpha"
		if i%5 == 0 {
			project = "beta"
		}
		s := session{ID: fmt.Sprintf("q%02d", i), Project: project, CreatedAt: base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339), State: "ready"}
		if err := sessions.Put(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	var all []session
	var cursor dynamo.Cursor
	pages := 0
	for {
		var page []session
		next, err := sessions.Query(t.Context(), dynamo.Query{
			Index: resources.SessionsByProject,
			Key:   expression.Key("project_name").Equal(expression.Value("alpha")),
			Limit: 7,
			After: cursor,
		}, &page)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 7 {
			t.Fatalf("page of %d items, limit 7", len(page))
		}
		pages++
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(all) != 20 {
		t.Fatalf("got %d alpha sessions, want 20", len(all))
	}
	if pages < 3 {
		t.Errorf("read in %d pages, want at least 3", pages)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].CreatedAt >= all[i].CreatedAt {
			t.Fatalf("not in created_at order at %d: %s then %s", i, all[i-1].CreatedAt, all[i].CreatedAt)
		}
	}
	if _, err := sessions.Query(t.Context(), dynamo.Query{
		Key:   expression.Key("session_id").Equal(expression.Value("q01")),
		Limit: dynamo.MaxPageSize + 1,
	}, &all); err == nil {
		t.Error("query above MaxPageSize accepted")
	}
	if _, err := sessions.Query(t.Context(), dynamo.Query{
		Key:   expression.Key("session_id").Equal(expression.Value("q01")),
		After: "not-a-cursor!",
	}, &all); !errors.Is(err, dynamo.ErrBadCursor) {
		t.Errorf("forged cursor: %v, want ErrBadCursor", err)
	}
	// A cursor of the right form, changed: DynamoDB refuses its key.
	first, err := sessions.Query(t.Context(), dynamo.Query{
		Index: resources.SessionsByProject,
		Key:   expression.Key("project_name").Equal(expression.Value("alpha")),
		Limit: 2,
	}, &all)
	if err != nil || first == "" {
		t.Fatalf("first page: %q %v", first, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(first))
	if err != nil {
		t.Fatal(err)
	}
	var key map[string]map[string]string
	if err := json.Unmarshal(raw, &key); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(map[string]map[string]string){
		"a key attribute gone":  func(k map[string]map[string]string) { delete(k, "session_id") },
		"another attribute":     func(k map[string]map[string]string) { k["state"] = map[string]string{"S": "ready"} },
		"a string for a number": func(k map[string]map[string]string) { k["created_at"] = map[string]string{"N": "12"} },
	} {
		forged := maps.Clone(key)
		change(forged)
		b, _ := json.Marshal(forged)
		if _, err := sessions.Query(t.Context(), dynamo.Query{
			Index: resources.SessionsByProject,
			Key:   expression.Key("project_name").Equal(expression.Value("alpha")),
			After: dynamo.Cursor(base64.RawURLEncoding.EncodeToString(b)),
		}, &all); !errors.Is(err, dynamo.ErrBadCursor) {
			t.Errorf("cursor with %s: %v, want ErrBadCursor", name, err)
		}
	}
}

func TestTTLAttributeEnabledAndSet(t *testing.T) {
	t.Parallel()
	set, api := setup(t)
	for _, table := range set.Tables() {
		out, err := api.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: &table.Name})
		if err != nil {
			t.Fatal(err)
		}
		d := out.TimeToLiveDescription
		if d == nil || d.AttributeName == nil || *d.AttributeName != resources.TTLAttribute || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
			t.Errorf("table %s TTL = %+v, want %s enabled", table.Name, d, resources.TTLAttribute)
		}
	}
	sessions := dynamo.NewTable(api, set.Sessions.Name)
	expires := time.Now().Add(time.Hour).Unix()
	if err := sessions.Put(t.Context(), session{ID: "ttl", State: "ended", ExpiresAt: expires}); err != nil {
		t.Fatal(err)
	}
	raw, err := api.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: &set.Sessions.Name,
		Key:       map[string]types.AttributeValue{"session_id": &types.AttributeValueMemberS{Value: "ttl"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := raw.Item[resources.TTLAttribute].(*types.AttributeValueMemberN)
	if !ok || n.Value != fmt.Sprint(expires) {
		t.Errorf("stored %s = %#v, want number %d", resources.TTLAttribute, raw.Item[resources.TTLAttribute], expires)
	}
}
