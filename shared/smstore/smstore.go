// Package smstore keeps apps' secrets (package secrets) in Secrets
// Manager: one secret each, named <prefix><app>/<name>.
package smstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/remote-agents/remote-agents/shared/secrets"
)

// API is the part of the Secrets Manager client the store calls.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
	CreateSecret(ctx context.Context, in *secretsmanager.CreateSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.CreateSecretOutput, error)
	PutSecretValue(ctx context.Context, in *secretsmanager.PutSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.PutSecretValueOutput, error)
	DeleteSecret(ctx context.Context, in *secretsmanager.DeleteSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DeleteSecretOutput, error)
	ListSecrets(ctx context.Context, in *secretsmanager.ListSecretsInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.ListSecretsOutput, error)
}

var (
	_ API           = (*secretsmanager.Client)(nil)
	_ secrets.Store = (*Store)(nil)
)

// Store keeps apps' secrets in Secrets Manager: one secret each, named
// <prefix><tenant>/<name>, whose value is the secret's value, rules and
// times as JSON. Only the egress proxy and the secrets routes read them.
type Store struct {
	api    API
	prefix string
}

// NewStore returns the store of secrets named under prefix (e.g.
// "ra/prod/secrets/").
func NewStore(api API, prefix string) *Store { return &Store{api: api, prefix: prefix} }

// record is a secret's value in Secrets Manager.
type record struct {
	secrets.Secret
	Value string `json:"value"`
}

func (s *Store) id(tenant, name string) string { return s.prefix + tenant + "/" + name }

// Put creates or replaces a secret.
func (s *Store) Put(ctx context.Context, tenant string, st secrets.Stored) error {
	raw, err := json.Marshal(record{Secret: st.Secret, Value: st.Value})
	if err != nil {
		return err
	}
	id := s.id(tenant, st.Name)
	_, err = s.api.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(id), SecretString: aws.String(string(raw)),
		Tags: []types.Tag{{Key: aws.String("ra:tenant"), Value: aws.String(tenant)}}})
	var exists *types.ResourceExistsException
	if errors.As(err, &exists) {
		_, err = s.api.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(id), SecretString: aws.String(string(raw))})
	}
	if err != nil {
		return fmt.Errorf("put secret %s: %w", st.Name, err)
	}
	return nil
}

// Get returns a secret; secrets.ErrNotFound if none.
func (s *Store) Get(ctx context.Context, tenant, name string) (secrets.Stored, error) {
	out, err := s.api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.id(tenant, name))})
	if notFound(err) {
		return secrets.Stored{}, secrets.ErrNotFound
	}
	if err != nil {
		return secrets.Stored{}, fmt.Errorf("get secret %s: %w", name, err)
	}
	var r record
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &r); err != nil {
		return secrets.Stored{}, fmt.Errorf("get secret %s: %w", name, err)
	}
	return secrets.Stored{Secret: r.Secret, Value: r.Value}, nil
}

// Delete removes a secret at once (no recovery window: a deleted secret's
// name may be used again); secrets.ErrNotFound if none.
func (s *Store) Delete(ctx context.Context, tenant, name string) error {
	_, err := s.api.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{SecretId: aws.String(s.id(tenant, name)), ForceDeleteWithoutRecovery: aws.Bool(true)})
	if notFound(err) {
		return secrets.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// List returns a tenant's secrets, by name, without their values.
func (s *Store) List(ctx context.Context, tenant string) ([]secrets.Secret, error) {
	prefix := s.id(tenant, "")
	var out []secrets.Secret
	p := secretsmanager.NewListSecretsPaginator(s.api, &secretsmanager.ListSecretsInput{
		Filters: []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{prefix}}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		for _, e := range page.SecretList {
			name, ok := strings.CutPrefix(aws.ToString(e.Name), prefix)
			if !ok || strings.Contains(name, "/") {
				continue // the name filter matches by prefix: another tenant's with this one's as its start
			}
			st, err := s.Get(ctx, tenant, name)
			if errors.Is(err, secrets.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, st.Secret)
		}
	}
	slices.SortFunc(out, func(a, b secrets.Secret) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func notFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}
