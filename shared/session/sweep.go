package session

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/remote-agents/remote-agents/shared/metrics"
)

// The sweep's limits. A session that stays provisioning past
// ProvisioningLimit, or ending past EndingLimit, is ended by the sweep, as is
// a running one whose sandbox has not heart-beaten for HeartbeatTimeout.
const (
	// ProvisioningLimit bounds launch and workspace provisioning (clone,
	// setup commands, restore) together.
	ProvisioningLimit = 20 * time.Minute
	// PausingLimit bounds a checkpoint of a pause: a session pausing
	// longer lost its sandbox midway.
	PausingLimit = 15 * time.Minute
	// EndingLimit bounds a graceful stop: StopGrace and the stop itself.
	EndingLimit = 2 * time.Minute
	// WatchShards spreads the live sessions over the sweep index's
	// partitions, so that no partition holds the whole fleet.
	WatchShards = 16
	// sweepPage bounds the sessions one shard's query returns; the sweep
	// pages on within a run until a shard has nothing due.
	sweepPage = 100
	// sweepMax bounds the sessions one run ends, so a run stays well inside a
	// Lambda's time; the next run goes on.
	sweepMax = 2000
)

// WatchShard is the sweep index partition of session id.
func WatchShard(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return "w" + strconv.Itoa(int(h.Sum32()%WatchShards))
}

// DueAfter is when a session must next show life after the change f
// records: a heartbeat (or ready) is life, and the next one is due within
// HeartbeatTimeout. Zero: f changes nothing of it.
func DueAfter(f Fields) time.Time {
	last := f.HeartbeatAt
	if last.IsZero() {
		last = f.ReadyAt
	}
	if last.IsZero() {
		return time.Time{}
	}
	return last.Add(HeartbeatTimeout)
}

// SweepReport says what a sweep ended.
type SweepReport struct {
	// Checked counts the due sessions read; Lost, Stuck and Ended those it
	// ended: lost (no heartbeat), stuck provisioning (failed, timeout), stuck
	// ending (ended with the reason they were ending for).
	Checked, Lost, Stuck, Ended int
	// Stop are the sessions it ended, as they were then: their sandboxes
	// (SandboxRef) are for the caller to stop.
	Stop []Session
}

// CounterQuiet is how long a tenant's live count must have stood still
// before the sweep checks it against the index (which has caught up by then).
const CounterQuiet = time.Minute

// SweeperOptions configure a Sweeper.
type SweeperOptions struct {
	Store Store
	// Tenants lists the tenants (the app keys') whose live counts each sweep
	// checks and repairs (Store.RepairLive) and reports (the LiveSessions
	// metric); nil: none.
	Tenants func(ctx context.Context) ([]string, error)
	Log     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Sweeper ends the sessions nobody else would (Sweep).
type Sweeper struct {
	o SweeperOptions
}

// NewSweeper returns a sweeper with options o.
func NewSweeper(o SweeperOptions) *Sweeper {
	o.Now, o.Log = clock(o.Now), logger(o.Log)
	return &Sweeper{o: o}
}

// Sweep ends the sessions nobody would otherwise end: running ones whose
// sandbox stopped heart-beating (lost: nobody needs to call alive), and ones
// stuck provisioning or ending past their limits, and returns them for their
// sandboxes to be stopped (jobworker stops them). It reads only the sweep index's due
// sessions (never a scan) and re-reads each before acting, with the
// conditional transitions, so a session that showed life meanwhile is left
// alone and two sweeps at once end a session once.
func (s *Sweeper) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := s.o.Now()
	for shard := range WatchShards {
		seen := map[string]bool{}
		for rep.Checked < sweepMax {
			ids, err := s.o.Store.Due(ctx, "w"+strconv.Itoa(shard), now, sweepPage)
			if err != nil {
				return rep, fmt.Errorf("sweep shard %d: %w", shard, err)
			}
			fresh := slices.DeleteFunc(ids, func(id string) bool { return seen[id] })
			if len(fresh) == 0 {
				break
			}
			for _, id := range fresh {
				seen[id] = true
				rep.Checked++
				if err := s.sweepOne(ctx, id, now, &rep); err != nil {
					return rep, err
				}
			}
		}
	}
	return rep, s.checkCounts(ctx)
}

// checkCounts repairs each tenant's live count if a crash left it off, and
// reports it.
func (s *Sweeper) checkCounts(ctx context.Context) error {
	if s.o.Tenants == nil {
		return nil
	}
	tenants, err := s.o.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, tenant := range tenants {
		n, err := s.o.Store.RepairLive(ctx, tenant, CounterQuiet)
		if err != nil {
			return fmt.Errorf("live count of %s: %w", tenant, err)
		}
		metrics.Emit(ctx, s.o.Log, tenant, []metrics.Value{{Name: metrics.LiveSessions, Value: float64(n), Unit: "Count"}})
	}
	return nil
}

func (s *Sweeper) sweepOne(ctx context.Context, id string, now time.Time, rep *SweepReport) error {
	sess, err := s.o.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var c Change
	switch {
	case sess.Lost(now):
		c, rep.Lost = LostChange(sess, now), rep.Lost+1
	case sess.State == Provisioning && now.Sub(sess.CreatedAt) > ProvisioningLimit:
		c, rep.Stuck = Change{From: []State{Provisioning}, To: Failed, Reason: ReasonTimeout, Generation: sess.Generation}, rep.Stuck+1
	case sess.State == Ending && now.Sub(sess.UpdatedAt) > EndingLimit:
		c, rep.Ended = Change{From: []State{Ending}, To: Ended, Generation: sess.Generation}, rep.Ended+1
	case sess.State == Pausing && now.Sub(sess.UpdatedAt) > PausingLimit, sess.State == Resuming && now.Sub(sess.UpdatedAt) > ProvisioningLimit:
		// Its sandbox never finished the checkpoint, or never got ready:
		// paused on the last committed checkpoint, or over without one.
		c, rep.Stuck = Change{From: []State{sess.State}, To: Paused, Reason: ReasonTimeout, Generation: sess.Generation, Set: Fields{PausedAt: now}}, rep.Stuck+1
		if sess.CheckpointID == "" {
			c.To, c.Set = Ended, Fields{}
		}
	default:
		return nil // not due after all: it showed life after the index was read
	}
	ended, err := s.o.Store.Transition(ctx, id, c)
	if errors.Is(err, ErrConflict) {
		return nil // it moved meanwhile
	}
	if err != nil {
		return err
	}
	s.o.Log.InfoContext(ctx, "sweep ended a session", slog.String("session_id", id), slog.String("state", string(ended.State)), slog.String("reason", string(ended.Reason)))
	rep.Stop = append(rep.Stop, ended)
	return nil
}
