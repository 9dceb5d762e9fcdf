package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/session"
)

var _ session.Viewers = (*Sessions)(nil)

// viewerKey is the idempotency table's item naming the session a viewer
// connection watches (WebSocket's $disconnect names only the connection).
func viewerKey(connectionID string) map[string]string {
	return map[string]string{"key": "viewer#" + connectionID}
}

// viewerRecord is that item.
type viewerRecord struct {
	Key       string `json:"key"`
	SessionID string `json:"session_id"`
	ExpiresAt int64  `json:"expires_at"`
}

// connectionSet is a string set of one connection id.
func connectionSet(connectionID string) *types.AttributeValueMemberSS {
	return &types.AttributeValueMemberSS{Value: []string{connectionID}}
}

// AddViewer records connectionID as a viewer of session id, in the
// session's viewers set (which every append reads back) and as the
// connection's record, and returns the viewers after; session.ErrOverQuota
// when the set holds max already, session.ErrNotFound when there is no
// such session.
func (s *Sessions) AddViewer(ctx context.Context, id, connectionID string, max int, expires time.Time) (session.Watch, error) {
	if err := s.idempotency.Put(ctx, viewerRecord{Key: viewerKey(connectionID)["key"], SessionID: id, ExpiresAt: expires.Unix()}); err != nil {
		return session.Watch{}, fmt.Errorf("record viewer of %s: %w", id, err)
	}
	viewers := expression.Name("viewers")
	room := expression.AttributeNotExists(viewers).
		Or(expression.Size(viewers).LessThan(expression.Value(max))).
		Or(expression.Contains(viewers, connectionID))
	var after watchItem
	err := s.sessions.Update(ctx, sessionKey{id}, expression.Add(viewers, expression.Value(connectionSet(connectionID))).Add(expression.Name("viewer_epoch"), expression.Value(1)), &after,
		expression.AttributeExists(expression.Name("session_id")).And(room))
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		if len(cf.Item) == 0 {
			return session.Watch{}, fmt.Errorf("session %s: %w", id, session.ErrNotFound)
		}
		return session.Watch{}, fmt.Errorf("viewers of %s: %w", id, session.ErrOverQuota)
	}
	if err != nil {
		return session.Watch{}, fmt.Errorf("add viewer of %s: %w", id, err)
	}
	return after.watch(), nil
}

// watchItem is what a change to a session's viewers reads back.
type watchItem struct {
	Viewers []string `json:"viewers"`
	Epoch   int64    `json:"viewer_epoch"`
	Push    string   `json:"push_connection_id"`
}

func (w watchItem) watch() session.Watch {
	return session.Watch{Viewers: len(w.Viewers), Epoch: w.Epoch, PushConnectionID: w.Push}
}

// ViewerSession returns the session connectionID watches;
// session.ErrNotFound if it is no viewer's.
func (s *Sessions) ViewerSession(ctx context.Context, connectionID string) (string, error) {
	var rec viewerRecord
	err := s.idempotency.Get(ctx, viewerKey(connectionID), &rec)
	if errors.Is(err, ErrNotFound) || err == nil && rec.ExpiresAt < s.now().Unix() {
		return "", fmt.Errorf("viewer %s: %w", connectionID, session.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("find viewer: %w", err)
	}
	return rec.SessionID, nil
}

// RemoveViewer takes connectionID out of session id's viewers (a post
// found it gone, or it closed), and returns those left; its record
// expires.
func (s *Sessions) RemoveViewer(ctx context.Context, id, connectionID string) (session.Watch, error) {
	var after watchItem
	err := s.sessions.Update(ctx, sessionKey{id}, expression.Delete(expression.Name("viewers"), expression.Value(connectionSet(connectionID))).Add(expression.Name("viewer_epoch"), expression.Value(1)), &after,
		expression.AttributeExists(expression.Name("session_id")))
	if errors.Is(err, ErrConditionFailed) {
		return session.Watch{}, nil
	}
	if err != nil {
		return session.Watch{}, fmt.Errorf("remove viewer of %s: %w", id, err)
	}
	return after.watch(), nil
}

// partialKey is the idempotency table's item that keeps the message
// session id's agent is writing (not the events table, whose stream
// announces every insert to webhooks).
func partialKey(id string) map[string]string { return map[string]string{"key": "partial#" + id} }

// partialItem is the text so far of the message a session's agent is
// writing, as the pieces it came in.
type partialItem struct {
	Key       string   `json:"key"`
	MessageID string   `json:"message_id"`
	Pieces    []string `json:"pieces"`
	Chars     int      `json:"chars"`
	UpdatedAt string   `json:"updated_at"`
	ExpiresAt int64    `json:"expires_at"`
}

// AddPartial adds text, which follows the first offset characters of
// message messageID, to the session's message being written: a message of
// its own when offset is 0, else only if what is kept ends at offset (a
// piece out of order, or past session.MaxPartialChars, is not kept:
// session.ErrConflict).
func (s *Sessions) AddPartial(ctx context.Context, id, messageID string, offset int, text string) error {
	now := s.now().UTC()
	n := utf8.RuneCountInString(text)
	if offset == 0 {
		if n > session.MaxPartialChars {
			return fmt.Errorf("partial of %s: %w", id, session.ErrConflict)
		}
		return s.idempotency.Put(ctx, partialItem{Key: partialKey(id)["key"], MessageID: messageID, Pieces: []string{text}, Chars: n,
			UpdatedAt: now.Format(time.RFC3339Nano), ExpiresAt: now.Add(session.PartialRetention).Unix()})
	}
	if offset+n > session.MaxPartialChars {
		return fmt.Errorf("partial of %s: %w", id, session.ErrConflict)
	}
	pieces, chars := expression.Name("pieces"), expression.Name("chars")
	up := expression.Set(pieces, expression.ListAppend(pieces, expression.Value([]string{text}))).
		Add(chars, expression.Value(n)).
		Set(expression.Name("updated_at"), expression.Value(now.Format(time.RFC3339Nano)))
	cond := expression.Name("message_id").Equal(expression.Value(messageID)).And(chars.Equal(expression.Value(offset)))
	err := s.idempotency.Update(ctx, partialKey(id), up, nil, cond)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("partial of %s: %w", id, session.ErrConflict)
	}
	return err
}

// Partial returns the message session id's agent is writing, or last
// wrote; the zero Partial if none.
func (s *Sessions) Partial(ctx context.Context, id string) (session.Partial, error) {
	var it partialItem
	err := s.idempotency.Get(ctx, partialKey(id), &it)
	if errors.Is(err, ErrNotFound) {
		return session.Partial{}, nil
	}
	if err != nil {
		return session.Partial{}, fmt.Errorf("read the partial message of %s: %w", id, err)
	}
	return session.Partial{MessageID: it.MessageID, Text: strings.Join(it.Pieces, "")}, nil
}
