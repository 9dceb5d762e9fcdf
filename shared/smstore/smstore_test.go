package smstore_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/shared/secrets"
	"github.com/remote-agents/remote-agents/shared/secrets/secretstest"
	"github.com/remote-agents/remote-agents/shared/smstore"
)

// secretsManager answers the Secrets Manager JSON protocol for the calls
// the store makes, as the service does (its error types, its prefix filter):
// the SDK's real client talks to it.
func secretsManager(t *testing.T) *secretsmanager.Client {
	t.Helper()
	var mu sync.Mutex
	values := map[string]string{}
	fail := func(w http.ResponseWriter, typ string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": typ})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Name         string
			SecretID     string `json:"SecretId"`
			SecretString string
			Filters      []struct {
				Key    string
				Values []string
			}
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		id := in.Name + in.SecretID
		mu.Lock()
		defer mu.Unlock()
		out := map[string]any{}
		switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.") {
		case "CreateSecret":
			if _, ok := values[id]; ok {
				fail(w, "ResourceExistsException")
				return
			}
			values[id] = in.SecretString
			out["Name"] = id
		case "PutSecretValue", "GetSecretValue", "DeleteSecret":
			if _, ok := values[id]; !ok {
				fail(w, "ResourceNotFoundException")
				return
			}
			switch r.Header.Get("X-Amz-Target") {
			case "secretsmanager.PutSecretValue":
				values[id] = in.SecretString
			case "secretsmanager.GetSecretValue":
				out["SecretString"] = values[id]
			default:
				delete(values, id)
			}
			out["Name"] = id
		case "ListSecrets":
			var list []map[string]string
			names := make([]string, 0, len(values))
			for n := range values {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				if strings.HasPrefix(n, in.Filters[0].Values[0]) {
					list = append(list, map[string]string{"Name": n})
				}
			}
			out["SecretList"] = list
		default:
			fail(w, "InvalidRequestException")
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return secretsmanager.New(secretsmanager.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}})
}

func TestStore(t *testing.T) {
	secretstest.Run(t, func(t *testing.T) secrets.Store { return smstore.NewStore(secretsManager(t), "ra/test/secrets/") })
}
