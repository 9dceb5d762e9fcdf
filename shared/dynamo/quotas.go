package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/remote-agents/remote-agents/shared/awserr"
	"github.com/remote-agents/remote-agents/shared/resources"
	"github.com/remote-agents/remote-agents/shared/session"
)

// The quota counters are items of the idempotency table: a tenant's live
// sessions ("quota#live#<tenant>", n, and at: when it last moved, in epoch
// milliseconds) and its creates in a minute ("quota#creates#<tenant>#<unix
// minute>", expiring with it).
func liveKey(tenant string) map[string]string {
	return map[string]string{"key": "quota#live#" + tenant}
}

func minuteKey(tenant string, minute time.Time) map[string]string {
	return map[string]string{"key": "quota#creates#" + tenant + "#" + strconv.FormatInt(minute.Unix(), 10)}
}

// countBy moves a counter by delta, noting when.
func countBy(delta int, now time.Time) expression.UpdateBuilder {
	return expression.Add(expression.Name("n"), expression.Value(delta)).Set(expression.Name("at"), expression.Value(now.UnixMilli()))
}

// under is the condition that a counter is below limit (none for 0).
func under(limit int) []expression.ConditionBuilder {
	if limit <= 0 {
		return nil
	}
	n := expression.Name("n")
	return []expression.ConditionBuilder{expression.AttributeNotExists(n).Or(n.LessThan(expression.Value(limit)))}
}

type counterItem struct {
	N  int   `json:"n"`
	At int64 `json:"at"`
}

// LiveCount reads tenant's live counter (0 when it has none).
func (s *Sessions) LiveCount(ctx context.Context, tenant string) (int, error) {
	var it counterItem
	err := s.idempotency.Get(ctx, liveKey(tenant), &it)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return it.N, err
}

// RepairLive sets tenant's live counter to the by_live index's count when
// they differ and the counter has not moved for quiet (the index has caught
// up with every write by then): conditional on the counter as read, so a
// create or end in between wins and the repair waits for the next sweep.
func (s *Sessions) RepairLive(ctx context.Context, tenant string, quiet time.Duration) (int, error) {
	var it counterItem
	err := s.idempotency.Get(ctx, liveKey(tenant), &it)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	now := s.now()
	if now.Sub(time.UnixMilli(it.At)) < quiet {
		return it.N, nil
	}
	counted, err := s.CountLive(ctx, tenant, 1<<30)
	if err != nil || counted == it.N {
		return it.N, err
	}
	up := expression.Set(expression.Name("n"), expression.Value(counted)).Set(expression.Name("at"), expression.Value(now.UnixMilli()))
	at := expression.Name("at")
	cond := expression.AttributeNotExists(at).Or(at.Equal(expression.Value(it.At)))
	if err := s.idempotency.Update(ctx, liveKey(tenant), up, nil, cond); errors.Is(err, ErrConditionFailed) {
		return s.LiveCount(ctx, tenant)
	} else if err != nil {
		return 0, err
	}
	return counted, nil
}

// CountLive counts tenant's live sessions on the by_live index (sparse: only
// live sessions of a tenant hold live_tenant), reading at most limit.
func (s *Sessions) CountLive(ctx context.Context, tenant string, limit int) (int, error) {
	key, err := expression.NewBuilder().WithKeyCondition(expression.Key("live_tenant").Equal(expression.Value(tenant))).Build()
	if err != nil {
		return 0, err
	}
	total := 0
	var start map[string]types.AttributeValue
	for total < limit {
		out, err := s.api.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(s.sessions.Name()), IndexName: aws.String(resources.SessionsByLive), Select: types.SelectCount,
			KeyConditionExpression: key.KeyCondition(), ExpressionAttributeNames: key.Names(), ExpressionAttributeValues: key.Values(),
			Limit: aws.Int32(int32(limit - total)), ExclusiveStartKey: start, //nolint:gosec // limit is a quota, at most config.MaxQuota
		})
		if err != nil {
			return 0, fmt.Errorf("count live sessions of %s: %w", tenant, awserr.Classify(err))
		}
		total += int(out.Count)
		if start = out.LastEvaluatedKey; len(start) == 0 {
			break
		}
	}
	return total, nil
}

// OpenStream records an open event stream on the session item (its streams
// map), unless limit unlapsed ones are there; lapsed ones are dropped on the
// way. The write is conditional on the map as read: of two racing opens at
// the limit, one loses and is read again.
func (s *Sessions) OpenStream(ctx context.Context, id, stream string, until, now time.Time, limit int) error {
	for range 3 {
		sess, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		open := 0
		streams := expression.Name("streams")
		var up expression.UpdateBuilder
		for k, exp := range sess.Streams {
			if exp.UnixMilli() > now.UnixMilli() {
				open++
				continue
			}
			up = up.Remove(streams.AppendName(expression.Name(k)))
		}
		if open >= limit {
			return fmt.Errorf("streams of %s: %w", id, session.ErrConflict)
		}
		var cond expression.ConditionBuilder
		if sess.Streams == nil {
			up = expression.Set(streams, expression.Value(map[string]int64{stream: until.UnixMilli()}))
			cond = expression.AttributeNotExists(streams)
		} else {
			up = up.Set(streams.AppendName(expression.Name(stream)), expression.Value(until.UnixMilli()))
			cond = expression.Size(streams).Equal(expression.Value(len(sess.Streams)))
		}
		cond = expression.AttributeExists(expression.Name("session_id")).And(inStates(session.Live)).And(cond)
		err = s.sessions.Update(ctx, sessionKey{id}, up, nil, cond)
		if !errors.Is(err, ErrConditionFailed) {
			return err
		}
	}
	return fmt.Errorf("streams of %s: %w", id, session.ErrConflict)
}

// GrantUploads adds to the session item's upload_urls and upload_bytes in
// one update, conditional on the session being live and on each staying
// within its part of q: of racing grants at the limit, only those that fit
// are added.
func (s *Sessions) GrantUploads(ctx context.Context, id string, urls int, bytes int64, q session.UploadQuota) error {
	n, b := expression.Name("upload_urls"), expression.Name("upload_bytes")
	up := expression.Add(n, expression.Value(urls)).Add(b, expression.Value(bytes))
	cond := expression.AttributeExists(expression.Name("session_id")).And(inStates(session.Live))
	if q.URLs > 0 {
		if urls > q.URLs {
			return fmt.Errorf("uploads of %s: %w", id, session.ErrConflict)
		}
		cond = cond.And(expression.AttributeNotExists(n).Or(n.LessThanEqual(expression.Value(q.URLs - urls))))
	}
	if q.Bytes > 0 {
		if bytes > q.Bytes {
			return fmt.Errorf("uploads of %s: %w", id, session.ErrConflict)
		}
		cond = cond.And(expression.AttributeNotExists(b).Or(b.LessThanEqual(expression.Value(q.Bytes - bytes))))
	}
	err := s.sessions.Update(ctx, sessionKey{id}, up, nil, cond)
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("uploads of %s: %w", id, session.ErrConflict)
	}
	return err
}

// CloseStream forgets an event stream of the session.
func (s *Sessions) CloseStream(ctx context.Context, id, stream string) error {
	up := expression.Remove(expression.Name("streams").AppendName(expression.Name(stream)))
	err := s.sessions.Update(ctx, sessionKey{id}, up, nil, expression.AttributeExists(expression.Name("streams")))
	if errors.Is(err, ErrConditionFailed) {
		return nil // over, or never recorded
	}
	return err
}

// spendKey is the idempotency table's item of tenant's spend on day.
func spendKey(tenant string, day time.Time) map[string]string {
	return map[string]string{"key": "spend#" + tenant + "#" + day.UTC().Format("2006-01-02")}
}

// AddSpend adds to tenant's spend of day, outside any hold (Settle is the
// model gateway's).
func (s *Sessions) AddSpend(ctx context.Context, tenant string, day time.Time, microUSD int64) error {
	up := periodSpend.move(expression.Set(expression.Name("expires_at"), expression.Value(periodExpiry(session.ScopeTenantDay, day))), microUSD, 0)
	return s.idempotency.Update(ctx, spendKey(tenant, day), up, nil)
}

// Spend reads tenant's spend of day (0 when none was recorded).
func (s *Sessions) Spend(ctx context.Context, tenant string, day time.Time) (int64, error) {
	var it struct {
		MicroUSD int64 `json:"micro_usd"`
	}
	err := s.idempotency.Get(ctx, spendKey(tenant, day), &it)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return it.MicroUSD, err
}
