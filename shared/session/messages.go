package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/blob"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// Limits of messages.
const (
	MaxMessageBytes     = 32 * 1024
	MaxClientMessageID  = 128
	MaxAttachments      = 10
	MaxAttachmentBytes  = 25 << 20
	MaxAttachmentName   = 200
	MaxQuestionIDLen    = 128
	messageRetention    = 24 * time.Hour
	attachmentUploadTTL = 15 * time.Minute
)

var (
	answerID     = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
	attachmentID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// DefaultContentType is the type of an upload that names none.
const DefaultContentType = "application/octet-stream"

// MessageRequest is what a user (the embed view, an app) sends an agent: text
// (with attachments), an answer to a question, or env values.
type MessageRequest struct {
	Text            string            `json:"text,omitempty"`
	ClientMessageID string            `json:"client_message_id,omitempty"`
	Answer          *Answer           `json:"answer,omitempty"`
	Attachments     []Attachment      `json:"attachments,omitempty"`
	EnvValues       map[string]string `json:"env_values,omitempty"`
	// Interrupt stops the agent's turn in progress before the message is
	// taken (alone: only that).
	Interrupt bool `json:"interrupt,omitempty"`
}

// Answer picks an option of a question the agent asked.
type Answer = sandboxwire.Answer

// Attachment is a file the user uploaded (see PresignAttachment) for a message.
type Attachment = sandboxwire.Attachment

// MessageReceipt answers a message.
type MessageReceipt struct {
	AgentID         string `json:"agent_id"`
	Status          string `json:"status"`
	MessageID       int64  `json:"message_id"`
	ClientMessageID string `json:"client_message_id,omitempty"`
	// Replayed: a message with this client_message_id was queued before.
	Replayed bool `json:"-"`
}

// InboxOptions configure an Inbox.
type InboxOptions struct {
	Store Store
	// Blob keeps what must not be in events: attachments, and env values
	// users submit.
	Blob blob.Store
	// Secrets keeps the env values users chose to persist for a
	// configuration, encrypted at rest (ConfigurationEnvKey).
	Secrets blob.Sealed
	// Notifier, if set, wakes the session's sandbox whenever its inbox
	// grows (see Pushing); the inbox stays the durable record, which the
	// sandbox also polls.
	Notifier Notifier
	// Uploads bound the attachments' upload URLs (with the sandbox's own
	// uploads: GrantUploads); zero is no bound.
	Uploads UploadQuota
	// Jobs queues the resume of a paused agent whose type resumes on a
	// message (nil: its messages wait for a resume).
	Jobs Publisher
	Log  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Inbox serves what a session's token holder sends its agent: messages,
// attachments' uploads and env values.
type Inbox struct {
	Access
	o InboxOptions
}

// NewInbox returns an inbox with options o.
func NewInbox(o InboxOptions) *Inbox {
	o.Now, o.Log = clock(o.Now), logger(o.Log)
	o.Store = Pushing(o.Store, o.Notifier, o.Log)
	return &Inbox{Access: Access{Store: o.Store, Now: o.Now}, o: o}
}

// PostMessage queues a user's message to the inbox of sess (see Authorize),
// once per client_message_id: a retry gets the first receipt back.
func (s *Inbox) PostMessage(ctx context.Context, sess Session, req MessageRequest) (MessageReceipt, error) {
	id := sess.ID
	if err := validateMessage(id, req); err != nil {
		return MessageReceipt{}, err
	}
	if sess.State == Ending || !slices.Contains(Live, sess.State) {
		// A paused agent's messages wait in its inbox for its resume.
		return MessageReceipt{}, apierror.New(apierror.AgentNotAlive, "The agent is %s and takes no more messages.", sess.State)
	}
	if req.EnvValues != nil {
		if req.Text != "" || req.Answer != nil || len(req.Attachments) > 0 {
			return MessageReceipt{}, apierror.New(apierror.InvalidRequest, "Send env_values on their own.")
		}
		if _, err := s.SubmitEnv(ctx, sess, EnvSubmission{Values: req.EnvValues}); err != nil {
			return MessageReceipt{}, err
		}
		return MessageReceipt{AgentID: id, Status: "submitted", ClientMessageID: req.ClientMessageID}, nil
	}
	ev, err := NewEvent(sandboxwire.UserMessage{Text: req.Text, Answer: req.Answer, Attachments: req.Attachments, ClientMessageID: req.ClientMessageID, Interrupt: req.Interrupt})
	if err != nil {
		return MessageReceipt{}, err
	}
	if req.ClientMessageID == "" {
		out, err := s.o.Store.AppendEvents(ctx, id, sess.Generation, []Event{ev})
		if err != nil {
			return MessageReceipt{}, notAlive(err)
		}
		s.resumeFor(ctx, sess)
		return MessageReceipt{AgentID: id, Status: "queued", MessageID: out[0].Seq}, nil
	}
	now := s.o.Now().UTC()
	rec := IdempotencyRecord{
		Key:         messageKey(id, req.ClientMessageID),
		SessionID:   id,
		RequestHash: HashOf(req),
		CreatedAt:   now,
		ExpiresAt:   now.Add(messageRetention).Unix(),
	}
	got, replayed, err := AppendOnce(ctx, s.o.Store, id, sess.Generation, []Event{ev}, rec)
	switch {
	case err != nil:
		return MessageReceipt{}, notAlive(err)
	case replayed:
		return replayMessage(id, req, rec, got)
	}
	s.resumeFor(ctx, sess)
	return MessageReceipt{AgentID: id, Status: "queued", MessageID: got.Seq, ClientMessageID: req.ClientMessageID}, nil
}

// resumeFor resumes paused sess, whose type resumes on a message, for the
// message just queued (its inbox holds it for the resumed sandbox). One
// that cannot start now stays paused, the message waiting: logged.
func (s *Inbox) resumeFor(ctx context.Context, sess Session) {
	if sess.State != Paused || !ResumesOnMessage(sess) || s.o.Jobs == nil {
		return
	}
	if _, err := StartResume(ctx, s.o.Store, s.o.Jobs, s.o.Log, sess, "", s.o.Now().UTC()); err != nil && !errors.Is(err, ErrConflict) {
		s.o.Log.WarnContext(ctx, "resume on a message", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
	}
}

// OnceAppender appends events once per idempotency record (Store's
// AppendOnce and Idempotency).
type OnceAppender interface {
	// AppendOnce appends events, all or none, with rec (its Seq the last
	// event's); ErrIdempotencyTaken if rec's key is used.
	AppendOnce(ctx context.Context, id string, generation int, events []Event, rec IdempotencyRecord) ([]Event, error)
	// Idempotency reads the record of a key; ErrNotFound if absent.
	Idempotency(ctx context.Context, key string) (IdempotencyRecord, error)
}

// AppendOnce appends events under the idempotency record rec, once. It
// returns the record the append wrote (Seq: the last event's), or the first
// append's when rec's key was used before (replayed): whether that one
// carried the same content is the caller's to check, by RequestHash.
func AppendOnce(ctx context.Context, st OnceAppender, id string, gen int, events []Event, rec IdempotencyRecord) (IdempotencyRecord, bool, error) {
	// Read first: a retry must not take a sequence number, or readers would
	// wait GapGrace at the gap it leaves.
	if prev, err := st.Idempotency(ctx, rec.Key); err == nil {
		return prev, true, nil
	} else if !errors.Is(err, ErrNotFound) {
		return IdempotencyRecord{}, false, err
	}
	out, err := st.AppendOnce(ctx, id, gen, events, rec)
	if errors.Is(err, ErrIdempotencyTaken) {
		prev, err := st.Idempotency(ctx, rec.Key)
		return prev, err == nil, err
	}
	if err != nil {
		return IdempotencyRecord{}, false, err
	}
	rec.Seq = out[len(out)-1].Seq
	return rec, false, nil
}

func replayMessage(id string, req MessageRequest, rec, prev IdempotencyRecord) (MessageReceipt, error) {
	if prev.RequestHash != rec.RequestHash {
		return MessageReceipt{}, apierror.New(apierror.IdempotencyKeyReused, "This client_message_id was used for a different message.")
	}
	return MessageReceipt{AgentID: id, Status: "queued", MessageID: prev.Seq, ClientMessageID: req.ClientMessageID, Replayed: true}, nil
}

func notAlive(err error) error {
	if errors.Is(err, ErrConflict) {
		return apierror.New(apierror.AgentNotAlive, "The agent has ended and takes no more messages.")
	}
	return err
}

func messageKey(id, clientID string) string { return ScopedKey("message", id, clientID) }

// AttachmentPrefix is where a session's attachments are uploaded.
func AttachmentPrefix(id string) string { return "sessions/" + id + "/attachments/" }

func validateMessage(id string, req MessageRequest) error {
	invalid := func(format string, args ...any) error { return apierror.New(apierror.InvalidRequest, format, args...) }
	kinds := 0
	if strings.TrimSpace(req.Text) != "" || len(req.Attachments) > 0 {
		kinds++
	}
	if req.Answer != nil {
		kinds++
	}
	if req.EnvValues != nil {
		kinds++
	}
	switch {
	case kinds == 0 && !req.Interrupt:
		return invalid("Send text, an answer, env_values or interrupt.")
	case kinds > 1:
		return invalid("Send one of text (with its attachments), answer or env_values.")
	case req.Interrupt && req.EnvValues != nil:
		return invalid("Send env_values on their own.")
	case len(req.Text) > MaxMessageBytes || !utf8.ValidString(req.Text):
		return invalid("text must be at most %d bytes of UTF-8.", MaxMessageBytes)
	case len(req.ClientMessageID) > MaxClientMessageID || (req.ClientMessageID != "" && !Printable.MatchString(req.ClientMessageID)):
		return invalid("client_message_id must be 1 to %d printable ASCII characters.", MaxClientMessageID)
	case len(req.Attachments) > MaxAttachments:
		return invalid("Attach at most %d files.", MaxAttachments)
	}
	if a := req.Answer; a != nil {
		if len(a.QuestionID) > MaxQuestionIDLen || len(a.OptionID) > MaxQuestionIDLen || !answerID.MatchString(a.QuestionID) || !answerID.MatchString(a.OptionID) {
			return invalid("answer needs a question_id and an option_id of letters, digits and '_.:-'.")
		}
	}
	for i, a := range req.Attachments {
		rest, ok := strings.CutPrefix(a.Key, AttachmentPrefix(id))
		upload, name, _ := strings.Cut(rest, "/")
		if !ok || !attachmentID.MatchString(upload) || !validAttachmentName(name) {
			return invalid("attachments[%d].key is not an upload of this agent.", i)
		}
		if !validAttachmentName(a.Name) {
			return invalid("attachments[%d].name must be a file name of 1 to %d bytes, without '/', '\\' or control characters.", i, MaxAttachmentName)
		}
		if a.SizeBytes < 0 || a.SizeBytes > MaxAttachmentBytes {
			return invalid("attachments[%d] must be at most %d bytes.", i, MaxAttachmentBytes)
		}
		if a.ContentType != "" && !ValidContentType(a.ContentType) {
			return invalid("attachments[%d].content_type must be a media type such as text/plain.", i)
		}
	}
	return nil
}

// validAttachmentName reports whether name can name a file, be shown and be
// part of an object key: 1 to MaxAttachmentName bytes of UTF-8, not "." or
// "..", without a path separator, a control character (C0, DEL, C1) or a
// bidirectional formatting character (which can make "exe.txt" of "txt.exe").
func validAttachmentName(name string) bool {
	if name == "" || len(name) > MaxAttachmentName || !utf8.ValidString(name) || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return false
		}
	}
	return true
}

// ValidContentType reports whether ct is a media type (type/subtype, with
// parameters) of at most sandboxwire.MaxContentTypeBytes printable ASCII
// characters: a header value a client can send and S3 can sign.
func ValidContentType(ct string) bool {
	if len(ct) > sandboxwire.MaxContentTypeBytes {
		return false
	}
	for i := range len(ct) {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return false
		}
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && strings.Count(mt, "/") == 1 && !strings.HasPrefix(mt, "/") && !strings.HasSuffix(mt, "/")
}

// AttachmentUpload is where the browser PUTs one attachment: to UploadURL,
// with UploadHeaders as they are (they are signed) and a body of exactly the
// size asked for.
type AttachmentUpload struct {
	Key           string            `json:"key"`
	UploadURL     string            `json:"upload_url"`
	UploadHeaders map[string]string `json:"upload_headers"`
	ExpiresIn     int               `json:"expires_in_seconds"`
}

// PresignAttachment returns a presigned PUT URL for one file the user attaches
// to a message to sess (see Authorize): the embed view's file upload.
func (s *Inbox) PresignAttachment(ctx context.Context, sess Session, name, contentType string, size int64) (AttachmentUpload, error) {
	id := sess.ID
	if !validAttachmentName(name) {
		return AttachmentUpload{}, apierror.New(apierror.InvalidRequest, "name must be a file name of 1 to %d bytes, without '/', '\\' or control characters.", MaxAttachmentName)
	}
	if size < 1 || size > MaxAttachmentBytes {
		// An empty file is refused too: its upload would need a signed
		// Content-MD5, which the bucket's CORS rule does not let browsers send.
		return AttachmentUpload{}, apierror.New(apierror.InvalidRequest, "size_bytes must be 1 byte to %d MB: the file's exact size.", MaxAttachmentBytes>>20)
	}
	if contentType != "" && !ValidContentType(contentType) {
		return AttachmentUpload{}, apierror.New(apierror.InvalidRequest, "content_type must be a media type such as text/plain, of at most %d bytes.", sandboxwire.MaxContentTypeBytes)
	}
	if !slices.Contains(Running, sess.State) {
		return AttachmentUpload{}, apierror.New(apierror.AgentNotAlive, "The agent is %s and takes no more files.", sess.State)
	}
	if err := GrantUploads(ctx, s.o.Store, s.o.Uploads, sess, 1, size); err != nil {
		return AttachmentUpload{}, err
	}
	key := AttachmentPrefix(id) + newID() + "/" + name
	u, err := s.o.Blob.PresignPut(ctx, key, cmp.Or(contentType, DefaultContentType), size, attachmentUploadTTL)
	if err != nil {
		return AttachmentUpload{}, fmt.Errorf("presign attachment: %w", err)
	}
	return AttachmentUpload{Key: key, UploadURL: u.URL, UploadHeaders: u.Headers, ExpiresIn: int(attachmentUploadTTL.Seconds())}, nil
}

// Access authorizes the callers of a session's routes by their session
// token.
type Access struct {
	Store Reader
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Authorize returns the session a session token belongs to: 401 for a missing or
// wrong token, or one of an agent that ended more than TokenGrace ago; 404 for
// an unknown agent. Routes with a body call it before reading the body, and
// hand the session to the operation.
func (a Access) Authorize(ctx context.Context, id, tok string) (Session, error) {
	return Authorize(ctx, a.Store, id, tok, clock(a.Now)())
}

// Authorize returns session id if tok is one of its session tokens that
// still works at now: missing_token for none, agent_not_found for an id of
// no session, invalid_token for a wrong or expired token.
func Authorize(ctx context.Context, store Reader, id, tok string, now time.Time) (Session, error) {
	if tok == "" {
		return Session{}, apierror.New(apierror.MissingToken, "A session token is required.")
	}
	if !ValidID(id) {
		return Session{}, malformedID()
	}
	notFound := apierror.New(apierror.AgentNotFound, "No agent has the id %q.", id)
	sess, err := store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Session{}, notFound
	}
	if err != nil {
		return Session{}, err
	}
	if err := checkToken(sess, tok, now); err != nil {
		return Session{}, err
	}
	return sess, nil
}

// ValidID reports whether id has the form of a session id (a version 4
// UUID); an id of another form names no session.
func ValidID(id string) bool { return sessionID.MatchString(id) }

// malformedID answers an id no agent could have: not found, the id not
// quoted back (it may be as long as the request allows).
func malformedID() error { return apierror.New(apierror.AgentNotFound, "No agent has that id.") }
