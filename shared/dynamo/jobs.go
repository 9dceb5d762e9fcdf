package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/remote-agents/remote-agents/shared/job"
	"github.com/remote-agents/remote-agents/shared/jobevents"
	"github.com/remote-agents/remote-agents/shared/resources"
)

var _ job.Store = (*Jobs)(nil)

// Jobs stores orchestrator jobs in the jobs table and agent profiles in the
// registry table. In the jobs table, besides each job (job_id "job#<id>", sk "job"):
// the claim of a plan step (job_id "step#<plan step>", sk "job"), the outbox
// (job_id "outbox", sk "<job id>#<seq>") and the running jobs (job_id
// "running", sk the job id), the last two small and short-lived.
type Jobs struct {
	api      API
	jobs     *Table
	registry *Table
}

// NewJobs returns the job store over the jobs and registry tables.
func NewJobs(api API, jobsTable, registryTable string) *Jobs {
	return &Jobs{api: api, jobs: NewTable(api, jobsTable), registry: NewTable(api, registryTable)}
}

const (
	jobSK          = "job"
	jobPrefix      = "job#"
	stepPrefix     = "step#"
	outboxPK       = "outbox"
	runningPK      = "running"
	kindAgentProfl = "agent_profile"
)

type jobKey struct {
	JobID string `json:"job_id"`
	SK    string `json:"sk"`
}

// jobShards spreads the running jobs' markers and the event outbox over
// partitions ("running#3", "outbox#5"), as the sessions' sweep index is
// (session.WatchShards): no one partition takes every job's writes.
// Markers and events written before (in "running" and "outbox") are still
// read and removed.
const jobShards = 8

// jobShard is the partition suffix of job id.
func jobShard(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return "#" + strconv.Itoa(int(h.Sum32()%jobShards))
}

// jobPartitions are the partitions of kind (running, outbox): the shards,
// then the one from before them.
func jobPartitions(kind string) []string {
	out := make([]string, 0, jobShards+1)
	for i := range jobShards {
		out = append(out, kind+"#"+strconv.Itoa(i))
	}
	return append(out, kind)
}

func runningKey(id string) jobKey { return jobKey{runningPK + jobShard(id), id} }

func outboxKey(jobID string, seq int) jobKey {
	return jobKey{outboxPK + jobShard(jobID), fmt.Sprintf("%s#%02d", jobID, seq)}
}

type jobItem struct {
	jobKey
	job.Job
}

type stepItem struct {
	jobKey
	Target string `json:"target_job_id"`
}

type outboxItem struct {
	jobKey
	Job       string    `json:"outbox_job_id"`
	Seq       int       `json:"seq"`
	EventID   string    `json:"event_id"`
	Type      string    `json:"detail_type"`
	Time      time.Time `json:"time"`
	Detail    string    `json:"detail"`
	ExpiresAt int64     `json:"expires_at"`
}

// outboxRetention: an event nobody could publish in a week is dropped.
const outboxRetention = 7 * 24 * time.Hour

func (s *Jobs) outboxOps(events []job.Pending) ([]TxOp, error) {
	ops := make([]TxOp, 0, len(events))
	for _, p := range events {
		d, err := json.Marshal(p.Event.Detail)
		if err != nil {
			return nil, fmt.Errorf("encode event %s: %w", p.Event.ID, err)
		}
		it := outboxItem{jobKey: outboxKey(p.JobID, p.Seq), Job: p.JobID, Seq: p.Seq, EventID: p.Event.ID,
			Type: string(p.Event.Type), Time: p.Event.Time, Detail: string(d), ExpiresAt: p.Event.Time.Add(outboxRetention).Unix()}
		ops = append(ops, s.jobs.PutOp(it))
	}
	return ops, nil
}

// Create writes the job, its plan step's claim and its events.
func (s *Jobs) Create(ctx context.Context, j job.Job, events []job.Pending) (job.Job, error) {
	notExists := expression.AttributeNotExists(expression.Name("job_id"))
	ops := []TxOp{
		s.jobs.PutOp(stepItem{jobKey{stepPrefix + j.PlanStepID, jobSK}, j.ID}, notExists),
		s.jobs.PutOp(jobItem{jobKey{jobPrefix + j.ID, jobSK}, j}, notExists),
	}
	more, err := s.outboxOps(events)
	if err != nil {
		return job.Job{}, err
	}
	err = Transact(ctx, s.api, "", append(ops, more...)...)
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return s.stepHolder(ctx, j.PlanStepID)
	}
	if err != nil {
		return job.Job{}, fmt.Errorf("create job %s: %w", j.ID, err)
	}
	return j, nil
}

// Retry writes next, moves old's plan step claim to it and writes the
// events, in one transaction.
func (s *Jobs) Retry(ctx context.Context, old, next job.Job, events []job.Pending) (job.Job, error) {
	claim := jobKey{stepPrefix + old.PlanStepID, jobSK}
	ops := []TxOp{
		s.jobs.UpdateOp(claim, expression.Set(expression.Name("target_job_id"), expression.Value(next.ID)),
			expression.Name("target_job_id").Equal(expression.Value(old.ID))),
		s.jobs.PutOp(jobItem{jobKey{jobPrefix + next.ID, jobSK}, next}, expression.AttributeNotExists(expression.Name("job_id"))),
	}
	more, err := s.outboxOps(events)
	if err != nil {
		return job.Job{}, err
	}
	err = Transact(ctx, s.api, "", append(ops, more...)...)
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return s.stepHolder(ctx, old.PlanStepID)
	}
	if err != nil {
		return job.Job{}, fmt.Errorf("retry job %s: %w", old.ID, err)
	}
	return next, nil
}

// stepHolder returns the job plan step step's claim names, with
// job.ErrStepTaken: a write that needed the claim found it taken.
func (s *Jobs) stepHolder(ctx context.Context, step string) (job.Job, error) {
	var claim stepItem
	if err := s.jobs.Get(ctx, jobKey{stepPrefix + step, jobSK}, &claim); err != nil {
		return job.Job{}, fmt.Errorf("claim of plan step %s: %w", step, err)
	}
	got, err := s.Get(ctx, claim.Target)
	if err != nil {
		return job.Job{}, err
	}
	return got, fmt.Errorf("plan step %s: %w", step, job.ErrStepTaken)
}

// Get reads a job.
func (s *Jobs) Get(ctx context.Context, id string) (job.Job, error) {
	var it jobItem
	err := s.jobs.Get(ctx, jobKey{jobPrefix + id, jobSK}, &it)
	if errors.Is(err, ErrNotFound) {
		return job.Job{}, fmt.Errorf("job %s: %w", id, job.ErrNotFound)
	}
	if err != nil {
		return job.Job{}, err
	}
	return it.Job, nil
}

func statusIn(from []job.Status) expression.ConditionBuilder {
	if len(from) == 1 {
		return expression.Name("status").Equal(expression.Value(from[0]))
	}
	vals := make([]expression.OperandBuilder, 0, len(from)-1)
	for _, f := range from[1:] {
		vals = append(vals, expression.Value(f))
	}
	return expression.Name("status").In(expression.Value(from[0]), vals...)
}

// Transition applies c with its events.
func (s *Jobs) Transition(ctx context.Context, id string, c job.Change, events []job.Pending) (job.Job, error) {
	u := expression.Set(expression.Name("status"), expression.Value(c.To))
	if !c.StartedAt.IsZero() {
		u = u.Set(expression.Name("started_at"), Value(c.StartedAt))
	}
	if !c.FinishedAt.IsZero() {
		u = u.Set(expression.Name("finished_at"), Value(c.FinishedAt))
	}
	if c.TokensUsed > 0 {
		u = u.Set(expression.Name("tokens_used"), expression.Value(c.TokensUsed))
	}
	if c.Failure != nil {
		u = u.Set(expression.Name("failure"), Value(c.Failure))
	}
	if c.ExpiresAt != 0 {
		u = u.Set(expression.Name(resources.TTLAttribute), expression.Value(c.ExpiresAt))
	}
	if len(c.Outputs) > 0 {
		u = u.Set(expression.Name("outputs"), Value(c.Outputs))
	}
	ops := []TxOp{s.jobs.UpdateOp(jobKey{jobPrefix + id, jobSK}, u, expression.AttributeExists(expression.Name("job_id")), statusIn(c.From))}
	switch {
	case c.To == job.Running:
		ops = append(ops, s.jobs.PutOp(runningKey(id)))
	case c.To.Terminal():
		ops = append(ops, s.jobs.DeleteOp(runningKey(id)), s.jobs.DeleteOp(jobKey{runningPK, id}))
	}
	more, err := s.outboxOps(events)
	if err != nil {
		return job.Job{}, err
	}
	err = Transact(ctx, s.api, "", append(ops, more...)...)
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return job.Job{}, fmt.Errorf("job %s to %s: %w", id, c.To, job.ErrConflict)
	}
	if err != nil {
		return job.Job{}, fmt.Errorf("job %s to %s: %w", id, c.To, err)
	}
	return s.Get(ctx, id)
}

// AttachSession records the session of a created job's sandbox.
func (s *Jobs) AttachSession(ctx context.Context, id, sessionID string) (job.Job, error) {
	var it jobItem
	err := s.jobs.Update(ctx, jobKey{jobPrefix + id, jobSK}, expression.Set(expression.Name("session_id"), expression.Value(sessionID)), &it,
		expression.AttributeExists(expression.Name("job_id")), expression.AttributeNotExists(expression.Name("session_id")),
		expression.Name("status").Equal(expression.Value(job.Created)))
	var cf *ConditionFailedError
	if errors.As(err, &cf) {
		if derr := cf.Decode(&it); derr != nil {
			return job.Job{}, fmt.Errorf("job %s: %w", id, job.ErrNotFound)
		}
		return it.Job, fmt.Errorf("attach session to job %s: %w", id, job.ErrConflict)
	}
	if err != nil {
		return job.Job{}, err
	}
	return it.Job, nil
}

// AddOutputs records what a cancelled job's sandbox kept.
func (s *Jobs) AddOutputs(ctx context.Context, id string, tokens int64, outputs []job.Output) error {
	u := expression.Set(expression.Name("tokens_used"), expression.Value(tokens))
	if len(outputs) > 0 {
		u = u.Set(expression.Name("outputs"), Value(outputs))
	}
	err := s.jobs.Update(ctx, jobKey{jobPrefix + id, jobSK}, u, nil, expression.Name("status").Equal(expression.Value(job.Cancelled)),
		expression.AttributeNotExists(expression.Name("outputs")))
	if errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("outputs of job %s: %w", id, job.ErrConflict)
	}
	return err
}

// Outbox returns up to limit pending events: of job id, in order, from its
// shard (one query: what the job's own writes put there), or ("") of any
// job, each job's in order, from every shard and the partition from before
// the shards.
func (s *Jobs) Outbox(ctx context.Context, id string, limit int) ([]job.Pending, error) {
	partitions := jobPartitions(outboxPK)
	if id != "" {
		partitions = []string{outboxPK + jobShard(id)}
	}
	var items []outboxItem
	for _, pk := range partitions {
		key := expression.Key("job_id").Equal(expression.Value(pk))
		if id != "" {
			key = key.And(expression.Key("sk").BeginsWith(id + "#"))
		}
		page, err := QueryAll[outboxItem](ctx, s.jobs, Query{Key: key, Consistent: true}, limit-len(items))
		if err != nil {
			return nil, err
		}
		if items = append(items, page...); len(items) >= limit {
			break
		}
	}
	out := make([]job.Pending, 0, len(items))
	for _, it := range items {
		var d jobevents.Detail
		if err := json.Unmarshal([]byte(it.Detail), &d); err != nil {
			return nil, fmt.Errorf("outbox event %s: %w", it.EventID, err)
		}
		p := job.Pending{JobID: it.Job, Seq: it.Seq, Event: jobevents.Event{ID: it.EventID, Type: jobevents.DetailType(it.Type), Time: it.Time, Detail: d}}
		if it.JobID == outboxPK {
			p.Where = outboxPK
		}
		out = append(out, p)
	}
	return out, nil
}

// Published removes an event from the outbox: from the job's shard, or from
// the partition from before the shards where Outbox found it there.
func (s *Jobs) Published(ctx context.Context, p job.Pending) error {
	key := outboxKey(p.JobID, p.Seq)
	if p.Where == outboxPK {
		key.JobID = outboxPK
	}
	return s.jobs.Delete(ctx, key)
}

// Alerted records a running job's alert of kind as published, and puts its
// event in the outbox, in one transaction.
func (s *Jobs) Alerted(ctx context.Context, id, kind string, event job.Pending) error {
	alerted := expression.Name("alerted")
	u := expression.Set(alerted, expression.ListAppend(expression.IfNotExists(alerted, expression.Value([]string{})), expression.Value([]string{kind})))
	cond := expression.Name("status").Equal(expression.Value(job.Running)).
		And(expression.Or(expression.AttributeNotExists(alerted), expression.Not(expression.Contains(alerted, kind))))
	ops, err := s.outboxOps([]job.Pending{event})
	if err != nil {
		return err
	}
	err = Transact(ctx, s.api, "", append([]TxOp{s.jobs.UpdateOp(jobKey{jobPrefix + id, jobSK}, u, expression.AttributeExists(expression.Name("job_id")), cond)}, ops...)...)
	var canceled *TxCanceledError
	if errors.As(err, &canceled) && len(canceled.Reasons) > 0 && canceled.Reasons[0] == "ConditionalCheckFailed" {
		return fmt.Errorf("alert %s of job %s: %w", kind, id, job.ErrConflict)
	}
	return err
}

// Running lists up to limit running jobs' ids, reading every shard page by
// page.
func (s *Jobs) Running(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	for _, pk := range jobPartitions(runningPK) {
		items, err := QueryAll[jobKey](ctx, s.jobs, Query{Key: expression.Key("job_id").Equal(expression.Value(pk)), Consistent: true}, limit-len(ids))
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			ids = append(ids, it.SK)
		}
		if len(ids) >= limit {
			break
		}
	}
	return ids, nil
}

type profileItem struct {
	registryKey
	Kind string `json:"kind"`
	job.Profile
}

func profileKey(id string) registryKey {
	return registryKey{PK: kindAgentProfl + "#" + id, SK: kindAgentProfl}
}

// PutProfile writes a profile, keeping its created_at.
func (s *Jobs) PutProfile(ctx context.Context, p job.Profile) (job.Profile, error) {
	if cur, err := s.Profile(ctx, p.ID); err == nil {
		p.CreatedAt = cur.CreatedAt
	} else if !errors.Is(err, job.ErrNotFound) {
		return job.Profile{}, err
	}
	if err := s.registry.Put(ctx, profileItem{profileKey(p.ID), kindAgentProfl, p}); err != nil {
		return job.Profile{}, err
	}
	return p, nil
}

// Profile reads a profile.
func (s *Jobs) Profile(ctx context.Context, id string) (job.Profile, error) {
	var it profileItem
	err := s.registry.Get(ctx, profileKey(id), &it)
	if errors.Is(err, ErrNotFound) {
		return job.Profile{}, fmt.Errorf("agent profile %s: %w", id, job.ErrNotFound)
	}
	return it.Profile, err
}

// Profiles lists profiles by name.
func (s *Jobs) Profiles(ctx context.Context, cursor string, limit int) ([]job.Profile, string, error) {
	var items []profileItem
	next, err := s.registry.Query(ctx, Query{Index: "by_kind", Key: expression.Key("kind").Equal(expression.Value(kindAgentProfl)), Limit: limit, After: Cursor(cursor)}, &items)
	if err != nil {
		return nil, "", err
	}
	out := make([]job.Profile, len(items))
	for i, it := range items {
		out[i] = it.Profile
	}
	return out, string(next), nil
}
