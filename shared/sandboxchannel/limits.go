package sandboxchannel

import (
	"context"
	"errors"
	"log/slog"

	"github.com/remote-agents/remote-agents/shared/session"
)

// endForLimit moves sess, if it is over a limit, to ending with that
// limit's reason (its sandbox is told to stop), and returns it as it is
// after.
func (c *Service) endForLimit(ctx context.Context, sess session.Session) session.Session {
	why := session.OverLimit(session.EffectiveLimits(c.o.Limits, sess), sess, c.o.Now())
	if why == "" {
		return sess
	}
	to := session.Ending
	if c.o.Checkpoints != nil && ((why == session.ReasonIdleTimeout && session.PausesWhenIdle(sess)) || (why == session.ReasonTimeout && session.PausesAtEnd(sess))) {
		to = session.Pausing // its type's on_idle, or its auto-pause: a checkpoint, then no sandbox
	}
	after, err := c.o.Store.Transition(ctx, sess.ID, session.Change{From: session.Running, To: to, Generation: sess.Generation, Reason: why})
	if errors.Is(err, session.ErrConflict) {
		return sess
	}
	if err != nil {
		c.o.Log.WarnContext(ctx, "end a session over its limit", slog.String("session_id", sess.ID), slog.String("error", err.Error()))
		return sess
	}
	c.o.Log.InfoContext(ctx, "session over its limit", slog.String("session_id", sess.ID), slog.String("reason", string(why)), slog.String("state", string(to)))
	return after
}
