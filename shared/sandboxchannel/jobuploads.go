package sandboxchannel

import (
	"cmp"
	"context"
	"strings"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
	"github.com/remote-agents/remote-agents/shared/session"
)

// jobUploads returns presigned PUT URLs for the files of a job's sandbox
// (Tool sandboxwire.JobUploads): the files of its output/ and its log, keyed
// under the job of the session, jobs/{job_id}/{path} — the job is the
// session's, never the request's.
func (c *Service) jobUploads(ctx context.Context, sess session.Session, in sandboxwire.UploadsRequest) (sandboxwire.UploadsResponse, error) {
	invalid := func(format string, args ...any) error { return apierror.New(apierror.InvalidRequest, format, args...) }
	if sess.JobID == "" {
		return sandboxwire.UploadsResponse{}, invalid("Only a job's sandbox uploads a job's files.")
	}
	if len(in.Files) == 0 || len(in.Files) > sandboxwire.MaxUploadFiles {
		return sandboxwire.UploadsResponse{}, invalid("Send 1 to %d files.", sandboxwire.MaxUploadFiles)
	}
	seen := map[string]bool{}
	for i, f := range in.Files {
		if !sandboxwire.ValidUploadPath(f.Path) || (!strings.HasPrefix(f.Path, "output/") && f.Path != sandboxwire.JobLogPath) {
			return sandboxwire.UploadsResponse{}, invalid("files[%d].path must be a clean path under output/, or %s.", i, sandboxwire.JobLogPath)
		}
		if seen[f.Path] {
			return sandboxwire.UploadsResponse{}, invalid("files[%d].path %q is listed twice.", i, f.Path)
		}
		seen[f.Path] = true
		if f.SizeBytes < 0 || f.SizeBytes > sandboxwire.MaxEvidenceBytes {
			return sandboxwire.UploadsResponse{}, invalid("files[%d] must be at most %d bytes.", i, sandboxwire.MaxEvidenceBytes)
		}
		if f.ContentType != "" && !session.ValidContentType(f.ContentType) {
			return sandboxwire.UploadsResponse{}, invalid("files[%d].content_type must be a media type such as text/plain, of at most %d bytes.", i, sandboxwire.MaxContentTypeBytes)
		}
	}
	if err := c.grant(ctx, sess, in.Files); err != nil {
		return sandboxwire.UploadsResponse{}, err
	}
	out := sandboxwire.UploadsResponse{Uploads: make([]sandboxwire.Upload, 0, len(in.Files))}
	for _, f := range in.Files {
		key := sandboxwire.JobUploadKey(sess.JobID, f.Path)
		u, err := c.o.Blob.PresignPut(ctx, key, cmp.Or(f.ContentType, session.DefaultContentType), f.SizeBytes, sandboxwire.UploadTTL)
		if err != nil {
			return sandboxwire.UploadsResponse{}, err
		}
		out.Uploads = append(out.Uploads, sandboxwire.Upload{Path: f.Path, Key: key, URL: u.URL, Headers: u.Headers})
	}
	return out, nil
}
