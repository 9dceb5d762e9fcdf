//go:build image

package systemtest_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJobsInTheImage runs TestJobsUnderTheFargateProfile's jobs with the
// agent in the sandbox image (make image: sandbox/Dockerfile's debian stage,
// built by buildah), under the Fargate profile: make test-image runs it,
// with RA_TEST_IMAGE_ROOTFS the image's root filesystem.
func TestJobsInTheImage(t *testing.T) {
	rootfs := os.Getenv("RA_TEST_IMAGE_ROOTFS")
	if rootfs == "" {
		t.Fatal("RA_TEST_IMAGE_ROOTFS is not set: run make test-image, which builds the image")
	}
	rootfs, err := filepath.EvalSymlinks(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := os.MkdirTemp(filepath.Join(rootfs, "tmp"), "secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(secrets) })
	jobsUnderTheFargateProfile(t, secrets, rootfs)
}
