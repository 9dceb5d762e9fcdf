// Package config reads the remote_agents configuration: a config.yaml section with
// environment overrides, so a Lambda function can be configured without a file.
//
//	remote_agents:
//	  allowed_origins: []            # RA_ALLOWED_ORIGINS=a,b
//	  embed_features:                # RA_EMBED_FEATURES=file_upload,voice_mic
//	    file_upload: false
//	    context_usage: false
//	    voice_mic: false
//	  creation_timeout_seconds: 15   # RA_CREATION_TIMEOUT_SECONDS
//	  public_base_url: ""            # RA_PUBLIC_BASE_URL
//	  guardrails_path: data/platform-guardrails.md   # RA_GUARDRAILS_PATH (a path or s3://bucket/key)
//	  exception_webhook_url: ""      # RA_EXCEPTION_WEBHOOK_URL
//
// Anything wrong (an unknown key, a wrong type, a timeout out of range) is an error
// naming the key, so a bad configuration stops start-up instead of running half-set.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits of the creation timeout. API Gateway ends any request after 30 s, so a
// create must answer (ready or 408) before then.
const (
	DefaultCreationTimeout = 15 * time.Second
	MaxCreationTimeout     = 29 * time.Second
)

// DefaultGuardrailsPath is where the guardrails ship.
const DefaultGuardrailsPath = "data/platform-guardrails.md"

// Features are the optional parts of the embed view.
type Features struct {
	FileUpload   bool `json:"file_upload"`
	ContextUsage bool `json:"context_usage"`
	VoiceMic     bool `json:"voice_mic"`
}

// featureNames maps each feature's configuration name to its field.
var featureNames = map[string]func(*Features) *bool{
	"file_upload":   func(f *Features) *bool { return &f.FileUpload },
	"context_usage": func(f *Features) *bool { return &f.ContextUsage },
	"voice_mic":     func(f *Features) *bool { return &f.VoiceMic },
}

// RemoteAgents is the remote_agents section.
type RemoteAgents struct {
	AllowedOrigins      []string
	EmbedFeatures       Features
	CreationTimeout     time.Duration
	PublicBaseURL       string
	GuardrailsPath      string
	ExceptionWebhookURL string
}

// Defaults returns the spec's defaults: no origins, no features, 15 s.
func Defaults() RemoteAgents {
	return RemoteAgents{
		AllowedOrigins:  []string{},
		CreationTimeout: DefaultCreationTimeout,
		GuardrailsPath:  DefaultGuardrailsPath,
	}
}

// Load reads the file named by RA_CONFIG (which must exist if set), else
// ./config.yaml if present, then applies the environment overrides.
func Load() (Platform, error) {
	path, explicit := os.LookupEnv("RA_CONFIG")
	if !explicit || path == "" {
		path = "config.yaml"
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && !explicit:
		data = nil
	default:
		return Platform{}, fmt.Errorf("config: read %s: %w", path, err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse builds the configuration from a file's content (nil for none) and the
// environment lookup.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (Platform, error) {
	c := PlatformDefaults()
	if len(data) > 0 {
		if err := c.parseFile(data); err != nil {
			return Platform{}, fmt.Errorf("config: %s: %w", name, err)
		}
	}
	if err := c.applyEnv(lookup); err != nil {
		return Platform{}, fmt.Errorf("config: %w", err)
	}
	if err := c.applyPlatformEnv(lookup); err != nil {
		return Platform{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

func (c *RemoteAgents) parseFile(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return errors.New("want a mapping at the top level")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "remote_agents" {
			continue // other sections belong to other parts of the system
		}
		return c.parseSection(root.Content[i+1])
	}
	return nil
}

func (c *RemoteAgents) parseSection(n *yaml.Node) error {
	const prefix = "remote_agents"
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: want a mapping (line %d)", prefix, n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		name := prefix + "." + key
		var err error
		switch key {
		case "allowed_origins":
			var list []string
			if list, err = stringList(name, val); err == nil {
				c.AllowedOrigins, err = origins(name, list)
			}
		case "embed_features":
			c.EmbedFeatures, err = features(name, val)
		case "creation_timeout_seconds":
			var secs int
			if secs, err = integer(name, val); err == nil {
				c.CreationTimeout, err = timeout(name, secs)
			}
		case "public_base_url":
			if c.PublicBaseURL, err = str(name, val); err == nil && c.PublicBaseURL != "" {
				err = checkBaseURL(name, c.PublicBaseURL)
			}
		case "guardrails_path":
			c.GuardrailsPath, err = str(name, val)
			if err == nil && strings.TrimSpace(c.GuardrailsPath) == "" {
				err = fmt.Errorf("%s: must not be empty", name)
			}
		case "exception_webhook_url":
			if c.ExceptionWebhookURL, err = str(name, val); err == nil && c.ExceptionWebhookURL != "" {
				err = checkBaseURL(name, c.ExceptionWebhookURL)
			}
		default:
			err = fmt.Errorf("%s: unknown key (line %d)", name, n.Content[i].Line)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *RemoteAgents) applyEnv(lookup func(string) (string, bool)) error {
	if v, ok := lookup("RA_ALLOWED_ORIGINS"); ok {
		list, err := origins("RA_ALLOWED_ORIGINS", splitList(v))
		if err != nil {
			return err
		}
		c.AllowedOrigins = list
	}
	if v, ok := lookup("RA_EMBED_FEATURES"); ok {
		c.EmbedFeatures = Features{}
		for _, f := range splitList(v) {
			field, known := featureNames[f]
			if !known {
				return fmt.Errorf("RA_EMBED_FEATURES: unknown feature %q (want file_upload, context_usage, voice_mic)", f)
			}
			*field(&c.EmbedFeatures) = true
		}
	}
	if v, ok := lookup("RA_CREATION_TIMEOUT_SECONDS"); ok {
		secs, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("RA_CREATION_TIMEOUT_SECONDS: want a whole number of seconds, got %q", v)
		}
		if c.CreationTimeout, err = timeout("RA_CREATION_TIMEOUT_SECONDS", secs); err != nil {
			return err
		}
	}
	if v, ok := lookup("RA_PUBLIC_BASE_URL"); ok && v != "" {
		if err := checkBaseURL("RA_PUBLIC_BASE_URL", v); err != nil {
			return err
		}
		c.PublicBaseURL = v
	}
	if v, ok := lookup("RA_GUARDRAILS_PATH"); ok && v != "" {
		c.GuardrailsPath = v
	}
	if v, ok := lookup("RA_EXCEPTION_WEBHOOK_URL"); ok && v != "" {
		if err := checkBaseURL("RA_EXCEPTION_WEBHOOK_URL", v); err != nil {
			return err
		}
		c.ExceptionWebhookURL = v
	}
	return nil
}

func str(name string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!null") {
		return "", fmt.Errorf("%s: want a string (line %d)", name, n.Line)
	}
	return n.Value, nil
}

func integer(name string, n *yaml.Node) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, fmt.Errorf("%s: want a whole number (line %d), got %q", name, n.Line, n.Value)
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return 0, fmt.Errorf("%s: want a whole number (line %d), got %q", name, n.Line, n.Value)
	}
	return v, nil
}

func boolean(name string, n *yaml.Node) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, fmt.Errorf("%s: want true or false (line %d), got %q", name, n.Line, n.Value)
	}
	return n.Value == "true", nil
}

func stringList(name string, n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: want a list of strings (line %d)", name, n.Line)
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		s, err := str(fmt.Sprintf("%s[%d]", name, i), item)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func features(name string, n *yaml.Node) (Features, error) {
	var f Features
	if n.Kind != yaml.MappingNode {
		return f, fmt.Errorf("%s: want a mapping of feature: true/false (line %d)", name, n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		field, known := featureNames[key]
		if !known {
			return f, fmt.Errorf("%s.%s: unknown feature (line %d)", name, key, n.Content[i].Line)
		}
		v, err := boolean(name+"."+key, n.Content[i+1])
		if err != nil {
			return f, err
		}
		*field(&f) = v
	}
	return f, nil
}

func timeout(name string, secs int) (time.Duration, error) {
	d := time.Duration(secs) * time.Second
	if d < time.Second || d > MaxCreationTimeout {
		return 0, fmt.Errorf("%s: %d seconds is outside 1..%d", name, secs, int(MaxCreationTimeout/time.Second))
	}
	return d, nil
}

func splitList(v string) []string {
	out := []string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// origins accepts "scheme://host[:port]" origins and returns them as browsers send
// them in the Origin header: lower-case, without a trailing slash.
func origins(name string, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for i, o := range list {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("%s[%d]: %q is not an origin like https://app.example.com", name, i, o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}

func checkBaseURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", name, v)
	}
	return nil
}
