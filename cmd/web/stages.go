package main

import (
	"context"
	"log/slog"

	"fxdesk/internal/desk"
	"fxdesk/internal/lifecycle"
)

// webParts runs every long-lived part of the web process and reads its error: a part that fails
// stops the process. stop ends the stages in this order: guarded work, the venue's executor, the
// group commit, the price stream (and a follower's view of the holder's), the keeper; then the
// lease is released. The markets rail and the metrics listener stop with HTTP (shutdown).
type webParts struct {
	group                                     *lifecycle.Group
	guarded, venue, commit                    *lifecycle.Stage
	stream, follow, keeper, rail, metricsHTTP *lifecycle.Stage

	contention *contender
	log        *slog.Logger
	released   bool
}

func newWebParts(contention *contender, log *slog.Logger) *webParts {
	g := lifecycle.New(log)
	return &webParts{group: g, contention: contention, log: log,
		guarded: g.Stage(), venue: g.Stage(), commit: g.Stage(),
		stream: g.Stage(), follow: g.Stage(), keeper: g.Stage(), rail: g.Stage(), metricsHTTP: g.Stage()}
}

// stop stops the stages from guarded work to the keeper and releases the lease once. It may be
// called more than once: serve's shutdown calls it, and a deferred call covers a startup error
// after the claim.
func (p *webParts) stop(ctx context.Context) {
	p.guarded.Stop()
	// The venue's executor outlives the guarded work that sends through it, and stops before the
	// in-process venue simulator (the stream stage) does.
	p.venue.Stop()
	// The group commit outlives everything that submits to it (HTTP is drained before stop), and
	// answers what is still queued before it returns.
	p.commit.Stop()
	p.stream.Stop()
	p.follow.Stop()
	p.keeper.Stop()
	// Role, not the boot role: a standby that took over releases like a boot winner.
	if p.contention.desk.Role() == desk.Holder && !p.released {
		p.released = true
		if err := p.contention.keeper.Release(ctx); err != nil {
			p.log.WarnContext(ctx, "lease release incomplete", slog.Any("err", err))
		}
	}
}
