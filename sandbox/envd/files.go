package envd

import (
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"connectrpc.com/connect"
)

// MaxUploadBytes bounds one file of an upload.
const MaxUploadBytes = 5 << 30

// signed reports whether the request's signature lets it do op ("read",
// "write") on path: v1_ and the unpadded base64 of
// sha256("path:op:user:token[:expiration]"), unexpired.
func (s *Server) signed(q map[string][]string, path, op string) bool {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	sig := get("signature")
	if s.o.AccessToken == "" || !strings.HasPrefix(sig, "v1_") {
		return false
	}
	material := path + ":" + op + ":" + get("username") + ":" + s.o.AccessToken
	if exp := get("signature_expiration"); exp != "" {
		at, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || s.o.Now().Unix() > at {
			return false
		}
		material += ":" + exp
	}
	sum := sha256.Sum256([]byte(material))
	want := "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// fileAccess checks r's access token or signature for op on path, and the
// user it names.
func (s *Server) fileAccess(w http.ResponseWriter, r *http.Request, path, op string) bool {
	if !s.authorized(r.Header) && !s.signed(r.URL.Query(), path, op) {
		httpError(w, http.StatusUnauthorized, "the access token or the signature is missing or wrong")
		return false
	}
	if u := r.URL.Query().Get("username"); u != "" && u != DefaultUser {
		httpError(w, http.StatusUnauthorized, "user "+u+" is not available: files are "+DefaultUser+"'s")
		return false
	}
	return true
}

// pathError writes the HTTP error of a file operation's err.
func pathError(w http.ResponseWriter, err error) {
	var ce *connect.Error
	switch {
	case errors.As(err, &ce) && ce.Code() == connect.CodePermissionDenied:
		httpError(w, http.StatusForbidden, ce.Message())
	case errors.As(err, &ce):
		httpError(w, http.StatusBadRequest, ce.Message())
	case errors.Is(err, fs.ErrNotExist):
		httpError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, fs.ErrPermission):
		httpError(w, http.StatusForbidden, err.Error())
	default:
		httpError(w, http.StatusBadRequest, err.Error())
	}
}

// download answers GET /files?path=: the file's bytes.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("path")
	if !s.fileAccess(w, r, raw, "read") {
		return
	}
	path, err := s.checkPath("read", raw)
	if err != nil {
		pathError(w, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		pathError(w, err)
		return
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		pathError(w, err)
		return
	}
	if fi.IsDir() {
		httpError(w, http.StatusBadRequest, "a folder: "+raw)
		return
	}
	ctype := mime.TypeByExtension(filepath.Ext(path))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": filepath.Base(path)}))
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") && fi.Size() > 1024 {
		w.Header().Set("Content-Encoding", "gzip")
		// Node's fetch asks for gzip on every download: the fastest level,
		// so that a file that does not compress costs little.
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		_, _ = io.Copy(gz, f)
		_ = gz.Close()
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	_, _ = io.Copy(w, f)
}

// uploaded is one file an upload wrote, as the SDKs read it.
type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// upload answers POST /files: multipart (a part named file per file, its
// filename the path, else the query's path) or the bytes of one file
// (path in the query); either gzip-compressed (Content-Encoding).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			httpError(w, http.StatusBadRequest, "the body is not gzip: "+err.Error())
			return
		}
		defer func() { _ = gz.Close() }()
		body = gz
	}
	query := r.URL.Query().Get("path")
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []uploaded
	if mediaType != "multipart/form-data" {
		if query == "" {
			httpError(w, http.StatusBadRequest, "path is required")
			return
		}
		if !s.fileAccess(w, r, query, "write") {
			return
		}
		u, status, err := s.writeFile(query, body)
		if err != nil {
			httpError(w, status, err.Error())
			return
		}
		out = append(out, u)
	} else {
		mr := multipart.NewReader(body, params["boundary"])
		written := map[string]bool{}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				httpError(w, http.StatusBadRequest, "the multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			target := partPath(part)
			if query != "" && (target == "" || !filepath.IsAbs(target)) {
				target = query
			}
			if target == "" {
				httpError(w, http.StatusBadRequest, "a part names no path")
				return
			}
			if written[target] {
				httpError(w, http.StatusBadRequest, "the path is uploaded twice: "+target)
				return
			}
			written[target] = true
			if !s.fileAccess(w, r, target, "write") {
				return
			}
			u, status, err := s.writeFile(target, part)
			if err != nil {
				httpError(w, status, err.Error())
				return
			}
			out = append(out, u)
		}
	}
	if len(out) == 0 {
		httpError(w, http.StatusBadRequest, "no file in the upload")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// partPath is the filename a part gives with its folders (which
// Part.FileName drops).
func partPath(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeFile writes r to raw (checked for writing), through a temporary
// file beside it, so that a reader never sees half of it.
func (s *Server) writeFile(raw string, r io.Reader) (uploaded, int, error) {
	path, err := s.checkPath("write", raw)
	if err != nil {
		return uploaded{}, http.StatusForbidden, err
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return uploaded{}, http.StatusBadRequest, fmt.Errorf("a folder: %s", raw)
	}
	if err := s.mkdirAll(filepath.Dir(path)); err != nil {
		return uploaded{}, http.StatusBadRequest, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".upload-*")
	if err != nil {
		return uploaded{}, http.StatusInternalServerError, err
	}
	n, err := io.Copy(tmp, io.LimitReader(r, MaxUploadBytes+1))
	cerr := tmp.Close()
	if err == nil && n > MaxUploadBytes {
		err = fmt.Errorf("a file may hold at most %d bytes", int64(MaxUploadBytes))
	}
	if err = errors.Join(err, cerr); err == nil {
		err = os.Chmod(tmp.Name(), 0o644) //nolint:gosec // an uploaded file is the sandbox user's, readable as one it writes
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return uploaded{}, http.StatusInternalServerError, err
	}
	s.own(path)
	return uploaded{Path: s.clientPath(path), Name: filepath.Base(path), Type: "file"}, 0, nil
}
