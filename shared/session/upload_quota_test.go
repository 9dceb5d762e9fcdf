package session_test

import (
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxchannel"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
	"github.com/remote-agents/remote-agents/shared/toolspec"
)

// An agent's upload URLs, its attachments' and its sandbox's together, stop
// at its quota of URLs and of bytes: one more is 429 quota_exceeded naming
// the quota, and counts nothing; another agent has its own.
func TestUploadQuotaCountsAttachmentsAndSandboxUploads(t *testing.T) {
	t.Parallel()
	e := newEnvStack(t)
	ctx := t.Context()
	q := session.UploadQuota{URLs: 3, Bytes: 1 << 20}
	inbox := session.NewInbox(session.InboxOptions{Store: e.store, Blob: e.bucket, Uploads: q})
	ch := sandboxchannel.New(sandboxchannel.Options{Store: e.store, Blob: e.bucket, Uploads: q})
	evidence := func(sess session.Session, sizes ...int64) error {
		in := sandboxwire.UploadsRequest{Tool: toolspec.Verify, ToolCallID: "call-1"}
		for i, n := range sizes {
			in.Files = append(in.Files, sandboxwire.UploadFile{Path: string(rune('a'+i)) + ".log", SizeBytes: n})
		}
		_, err := ch.Uploads(ctx, sess, in)
		return err
	}

	sess, _, _ := e.add(t, session.Working, "")
	if _, err := inbox.PresignAttachment(ctx, sess, "notes.txt", "text/plain", 1000); err != nil {
		t.Fatal(err)
	}
	if err := evidence(sess, 10, 10); err != nil {
		t.Fatal(err)
	}
	_, err := inbox.PresignAttachment(ctx, sess, "more.txt", "text/plain", 1)
	refused(t, err, apierror.QuotaExceeded, 0, map[string]any{"quota": "uploads_per_session", "limit": 3})
	refused(t, evidence(sess, 1), apierror.QuotaExceeded, 0, map[string]any{"quota": "uploads_per_session"})

	other, _, _ := e.add(t, session.Working, "")
	if _, err := inbox.PresignAttachment(ctx, other, "big.bin", "", 1<<20-10); err != nil {
		t.Fatalf("another agent's first upload: %v", err)
	}
	refused(t, evidence(other, 11), apierror.QuotaExceeded, 0, map[string]any{"quota": "upload_gib_per_session"})
	if err := evidence(other, 10); err != nil {
		t.Fatalf("up to the bytes: %v", err)
	}
	got, err := e.store.Get(ctx, other.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.UploadURLs != 2 || got.UploadBytes != 1<<20 {
		t.Errorf("granted %d URLs of %d bytes, want 2 of %d", got.UploadURLs, got.UploadBytes, 1<<20)
	}
}
