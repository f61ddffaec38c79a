package swaps

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/schedule"
	"fxdesk/internal/tick"
)

// AlertExpired is raised when a pending charge expires uncharged.
const AlertExpired = "swap-charge-expired"

// Defaults.
const (
	DefaultBatch       = 500
	DefaultExpireAfter = 7 * 24 * time.Hour
)

// Pinner asks for conversion legs this process has no mid for. In fxdesk-cron it is the quote
// mirror follower (the leader subscribes them); inline it hands them to the tick engine. Each
// run calls it once with every leg its pending charges still need (possibly none).
type Pinner interface {
	Pin(ctx context.Context, legs ...string) error
}

// AlertInbox receives swap-charge-expired; *alert.Inbox satisfies it.
type AlertInbox interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
}

// Config shapes a Job. DB and Prices are required.
type Config struct {
	DB     *sql.DB
	Prices func() tick.Prices // the price view at the start of a run
	Pins   Pinner             // nil: nothing is pinned
	Alerts AlertInbox         // nil: expiries are only logged
	// Batch is how many positions one transaction settles. Default DefaultBatch.
	Batch int
	// ExpireAfter is how long a pending charge is retried, and how far back a run looks for
	// missed rollovers. Default DefaultExpireAfter (7 days).
	ExpireAfter time.Duration
}

// Job is processFxSwaps.
type Job struct {
	cfg Config
	log *slog.Logger
}

// New returns the job.
func New(cfg Config, log *slog.Logger) *Job {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.ExpireAfter <= 0 {
		cfg.ExpireAfter = DefaultExpireAfter
	}
	return &Job{cfg: cfg, log: log}
}

// run is one run's state.
type run struct {
	*Job
	at    time.Time
	conv  *book.Converter
	res   schedule.Result
	legs  map[string]bool
	batch int // batches committed, for the per-batch log line
}

// Run charges every rollover due at at (docs/architecture.md, «Scheduled jobs»), each position
// every due date it held, in one pass. It returns counts, per position and date unless said:
// charged (new deals), pending (parked for want of a conversion), retried (pending charges now
// charged), expired, swapFree and zero (settled without a deal), skipped (positions found with
// nothing left under lock: another run got there first, or closed), dates (rollover dates due).
func (j *Job) Run(ctx context.Context, at time.Time) (schedule.Result, error) {
	var prices tick.Prices
	if j.cfg.Prices != nil {
		prices = j.cfg.Prices()
	}
	conv, err := book.NewConverter(ctx, j.cfg.DB, prices)
	if err != nil {
		return nil, err
	}
	r := &run{Job: j, at: at, conv: conv, res: schedule.Result{}, legs: map[string]bool{}}
	if err := r.expire(ctx); err != nil {
		return r.res, err
	}
	if err := r.retryPending(ctx); err != nil {
		return r.res, err
	}
	due, err := DueRollovers(at, j.cfg.ExpireAfter)
	if err != nil {
		return r.res, fmt.Errorf("swaps: due rollovers: %w", err)
	}
	r.res["dates"] = len(due)
	if len(due) > 0 {
		if err := r.chargeDue(ctx, due); err != nil {
			return r.res, err
		}
	}
	r.pin(ctx)
	return r.res, nil
}

func (r *run) pin(ctx context.Context) {
	if r.cfg.Pins == nil {
		return
	}
	legs := make([]string, 0, len(r.legs))
	for s := range r.legs {
		legs = append(legs, s)
	}
	slices.Sort(legs)
	if err := r.cfg.Pins.Pin(ctx, legs...); err != nil {
		r.log.WarnContext(ctx, "swaps: cannot pin conversion legs; pending charges wait for them", slog.Any("legs", legs), slog.Any("err", err))
		return
	}
	if len(legs) > 0 {
		r.res["legsPinned"] = len(legs)
		r.log.InfoContext(ctx, "swaps: conversion legs pinned for pending charges", slog.Any("legs", legs))
	}
}
