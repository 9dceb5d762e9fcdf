package stack

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Check applies cdk-nag's AwsSolutions pack to every stack of app as it
// synthesizes (an Aspect): each finding the stack does not suppress with a
// reason (nag.go) becomes an error or warning of its construct, which
// Findings reads back and synth and deploy refuse.
func Check(app awscdk.App) {
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true), Reports: jsii.Bool(false)}), nil)
}

// metadata is a cloud assembly's metadata of constructs, by path.
type metadata map[string][]struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// Findings returns the errors and warnings the cloud assembly in dir
// records (its artifacts' metadata, in the manifest or a file of its own),
// each as "<level> <construct path>: <message>", sorted: cdk-nag's
// unsuppressed findings among them.
func Findings(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("read the cloud assembly: %w", err)
	}
	var m struct {
		Artifacts map[string]struct {
			Metadata metadata `json:"metadata"`
			File     string   `json:"additionalMetadataFile"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read the cloud assembly's manifest: %w", err)
	}
	var out []string
	for _, art := range m.Artifacts {
		all := []metadata{art.Metadata}
		if art.File != "" {
			var more metadata
			b, err := os.ReadFile(filepath.Join(dir, filepath.Base(art.File)))
			if err == nil {
				err = json.Unmarshal(b, &more)
			}
			if err != nil {
				return nil, fmt.Errorf("read the cloud assembly's metadata: %w", err)
			}
			all = append(all, more)
		}
		for path, entries := range merged(all) {
			for _, e := range entries {
				level, ok := strings.CutPrefix(e.Type, "aws:cdk:")
				if !ok || (level != "error" && level != "warning") {
					continue
				}
				msg := fmt.Sprint(e.Data)
				if i := strings.Index(msg, ". "); i > 0 {
					msg = msg[:i+1] // the rule and its first sentence
				}
				out = append(out, fmt.Sprintf("%s %s: %s", level, path, msg))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// merged is the entries of every metadata in all, by path.
func merged(all []metadata) metadata {
	out := metadata{}
	for _, md := range all {
		for path, entries := range md {
			out[path] = append(out[path], entries...)
		}
	}
	return out
}
