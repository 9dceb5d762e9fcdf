// Package secrets keeps an app's secrets: values its agents use but never
// read. A secret is a name, a write-only value and its injection rules:
// which host (and path prefix) its header goes to, and how the header is
// written from the value. Agent types name the secrets their agents use
// (workspace_config.secrets); the egress proxy adds the headers on the way
// out (package egressproxy), so no sandbox holds a value, and no answer,
// event or log does.
package secrets

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/egress"
	"github.com/remote-agents/remote-agents/shared/registry"
)

// Secret is a secret without its value: what the API answers.
type Secret struct {
	Name string `json:"name"`
	// EndUser is the app's user it is for ("": the app's own).
	EndUser   string    `json:"end_user,omitempty"`
	Inject    []Rule    `json:"inject"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Rule is where a secret goes: the header Header, written by Format (its
// {{value}} the secret's value; {{basic:USER}} "Basic " and the base64 of
// USER:value), on requests to Host whose path starts with PathPrefix.
type Rule struct {
	Host       string `json:"host"`
	PathPrefix string `json:"path_prefix,omitempty"`
	Header     string `json:"header"`
	Format     string `json:"format"`
}

// Request is a secret as written: POST /api/v1/secrets (with Name) and
// PUT /api/v1/secrets/{name} (without).
type Request struct {
	Name string `json:"name,omitempty"`
	// EndUser, if set, makes it that user's of the app: the agents created
	// for them (create's end_user) use it before the app's own of the name.
	EndUser string `json:"end_user,omitempty"`
	Value   string `json:"value"`
	Inject  []Rule `json:"inject"`
}

// List answers GET /api/v1/secrets.
type List struct {
	Secrets []Secret `json:"secrets"`
}

// Stored is a secret with its value, as a Store keeps it.
type Stored struct {
	Secret
	Value string
}

// ErrNotFound: the tenant has no secret of that name.
var ErrNotFound = errors.New("secret not found")

// Store keeps secrets by owner (Owner: an app, or one of its users) and
// name. On AWS, Secrets Manager.
type Store interface {
	// Put creates or replaces a secret.
	Put(ctx context.Context, owner string, s Stored) error
	// Get returns a secret; ErrNotFound if none.
	Get(ctx context.Context, owner, name string) (Stored, error)
	// Delete removes a secret; ErrNotFound if none.
	Delete(ctx context.Context, owner, name string) error
	// List returns an owner's secrets, by name, without their values (not
	// those of the owner's users).
	List(ctx context.Context, owner string) ([]Secret, error)
}

// Owner is whose a secret is: tenant's, or its user endUser's ("": the
// tenant's own).
func Owner(tenant, endUser string) string {
	if endUser == "" {
		return tenant
	}
	return tenant + "/users/" + endUser
}

// Limits of a secret.
const (
	MaxValueBytes  = 16 << 10
	MaxRules       = 16
	maxFormatBytes = 1024
	maxHeaderBytes = 128
	maxPrefixBytes = 1024
	// MaxSecrets bounds a tenant's secrets.
	MaxSecrets = 100
)

var (
	headerName = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`)
	basic      = regexp.MustCompile(`\{\{basic:([^{}:]*)\}\}`)
	// reserved are headers the proxy does not set: the request's framing
	// and routing, and the proxy's own.
	reserved = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive", "expect"}
)

func invalid(format string, args ...any) error {
	return apierror.New(apierror.InvalidRequest, format, args...)
}

// Service runs the secrets routes' operations over a Store.
type Service struct {
	store Store
	now   func() time.Time
}

// New returns a Service; now nil is time.Now.
func New(store Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now}
}

// Create stores a new secret of app's tenant: 409 secret_exists if it has
// one of that name (rotate it with Put).
func (s *Service) Create(ctx context.Context, app registry.AppKey, req Request) (Secret, error) {
	if !registry.ValidSecretName(req.Name) {
		return Secret{}, invalid("name must be 1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit.")
	}
	if err := checkEndUser(req.EndUser); err != nil {
		return Secret{}, err
	}
	owner := Owner(app.Tenant, req.EndUser)
	if _, err := s.store.Get(ctx, owner, req.Name); err == nil {
		return Secret{}, apierror.New(apierror.SecretExists, "A secret named %q exists already: PUT /api/v1/secrets/%s replaces it.", req.Name, req.Name)
	} else if !errors.Is(err, ErrNotFound) {
		return Secret{}, err
	}
	list, err := s.store.List(ctx, owner)
	if err != nil {
		return Secret{}, err
	}
	if len(list) >= MaxSecrets {
		return Secret{}, apierror.New(apierror.QuotaExceeded, "An app, and each of its users, keeps at most %d secrets.", MaxSecrets)
	}
	return s.put(ctx, owner, req.Name, req, time.Time{})
}

func checkEndUser(u string) error {
	if u != "" && !registry.ValidEndUser(u) {
		return invalid("end_user must be 1 to 128 letters, digits, '_', '-', '.', '@' or ':', starting with a letter or digit.")
	}
	return nil
}

// Put replaces (rotates) secret name of app's tenant (of its user
// req.EndUser, if set), value and rules: 404 secret_not_found if it has
// none.
func (s *Service) Put(ctx context.Context, app registry.AppKey, name string, req Request) (Secret, error) {
	if req.Name != "" && req.Name != name {
		return Secret{}, invalid("name, if given, must be the path's %q.", name)
	}
	if err := checkEndUser(req.EndUser); err != nil {
		return Secret{}, err
	}
	owner := Owner(app.Tenant, req.EndUser)
	old, err := s.store.Get(ctx, owner, name)
	if errors.Is(err, ErrNotFound) || !registry.ValidSecretName(name) {
		return Secret{}, notFound(name)
	}
	if err != nil {
		return Secret{}, err
	}
	return s.put(ctx, owner, name, req, old.CreatedAt)
}

func (s *Service) put(ctx context.Context, owner, name string, req Request, created time.Time) (Secret, error) {
	rules, err := checkRules(req.Inject)
	if err != nil {
		return Secret{}, err
	}
	if req.Value == "" || len(req.Value) > MaxValueBytes || strings.ContainsAny(req.Value, "\r\n\x00") {
		return Secret{}, invalid("value must be 1 to %d bytes, without line breaks or NUL (it goes into a header).", MaxValueBytes)
	}
	now := s.now().UTC()
	if created.IsZero() {
		created = now
	}
	st := Stored{Secret: Secret{Name: name, EndUser: req.EndUser, Inject: rules, CreatedAt: created, UpdatedAt: now}, Value: req.Value}
	if err := s.store.Put(ctx, owner, st); err != nil {
		return Secret{}, fmt.Errorf("store secret %s: %w", name, err)
	}
	return st.Secret, nil
}

// Delete removes secret name of app's tenant (of its user endUser, if
// set): 404 secret_not_found if none.
func (s *Service) Delete(ctx context.Context, app registry.AppKey, name, endUser string) error {
	if !registry.ValidSecretName(name) {
		return notFound(name)
	}
	if err := checkEndUser(endUser); err != nil {
		return err
	}
	err := s.store.Delete(ctx, Owner(app.Tenant, endUser), name)
	if errors.Is(err, ErrNotFound) {
		return notFound(name)
	}
	return err
}

// List returns app's tenant's secrets (its user endUser's, if set),
// without values.
func (s *Service) List(ctx context.Context, app registry.AppKey, endUser string) (List, error) {
	if err := checkEndUser(endUser); err != nil {
		return List{}, err
	}
	list, err := s.store.List(ctx, Owner(app.Tenant, endUser))
	if err != nil {
		return List{}, err
	}
	if list == nil {
		list = []Secret{}
	}
	return List{Secrets: list}, nil
}

// Header is a secret's header, rendered: set on requests to Host whose
// path starts with PathPrefix.
type Header struct {
	Host, PathPrefix, Name, Value string
}

// Injections returns the headers of the secrets of the given names of
// tenant's user endUser, or where that user has none of a name (or endUser
// is ""), of tenant's own, rendered for the egress proxy
// (egressgrant.Secrets); a name neither has is left out.
func (s *Service) Injections(ctx context.Context, tenant, endUser string, names []string) ([]Header, error) {
	var out []Header
	for _, n := range names {
		st, err := s.store.Get(ctx, Owner(tenant, endUser), n)
		if errors.Is(err, ErrNotFound) && endUser != "" {
			st, err = s.store.Get(ctx, tenant, n)
		}
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, r := range st.Inject {
			out = append(out, Header{Host: r.Host, PathPrefix: r.PathPrefix, Name: r.Header, Value: Render(r.Format, st.Value)})
		}
	}
	return out, nil
}

// Render writes a header's value from format and the secret's value.
func Render(format, value string) string {
	out := basic.ReplaceAllStringFunc(format, func(m string) string {
		user := basic.FindStringSubmatch(m)[1]
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+value))
	})
	return strings.ReplaceAll(out, "{{value}}", value)
}

func notFound(name string) error {
	if !registry.ValidSecretName(name) {
		return apierror.New(apierror.SecretNotFound, "No secret has that name.")
	}
	return apierror.New(apierror.SecretNotFound, "No secret is named %q.", name)
}

// checkRules validates a secret's rules: hosts lower-cased, at least one.
func checkRules(in []Rule) ([]Rule, error) {
	if len(in) == 0 || len(in) > MaxRules {
		return nil, invalid("inject must hold 1 to %d rules: where the secret goes ({\"host\", \"path_prefix\"?, \"header\", \"format\"}).", MaxRules)
	}
	out := make([]Rule, 0, len(in))
	for i, r := range in {
		r.Host = strings.ToLower(strings.TrimSuffix(r.Host, "."))
		if _, err := netip.ParseAddr(r.Host); err != nil && !egress.ValidHost(r.Host) {
			return nil, invalid("inject[%d].host must be a host name or an IP address (no scheme, port or path).", i)
		}
		if r.PathPrefix != "" && (!strings.HasPrefix(r.PathPrefix, "/") || len(r.PathPrefix) > maxPrefixBytes || strings.ContainsAny(r.PathPrefix, " \r\n\x00?#")) {
			return nil, invalid("inject[%d].path_prefix must be a path starting with / (at most %d bytes).", i, maxPrefixBytes)
		}
		if !headerName.MatchString(r.Header) || len(r.Header) > maxHeaderBytes || slices.Contains(reserved, strings.ToLower(r.Header)) || strings.HasPrefix(strings.ToLower(r.Header), "proxy-") {
			return nil, invalid("inject[%d].header must be a header's name, not one that frames or routes the request (Host, Content-Length, Connection, Proxy-*…).", i)
		}
		if len(r.Format) > maxFormatBytes || strings.ContainsAny(r.Format, "\r\n\x00") || (!strings.Contains(r.Format, "{{value}}") && !basic.MatchString(r.Format)) {
			return nil, invalid("inject[%d].format must hold {{value}} (the secret) or {{basic:USER}} (Basic auth of USER and the secret), like \"Bearer {{value}}\", in at most %d bytes.", i, maxFormatBytes)
		}
		out = append(out, r)
	}
	return out, nil
}
