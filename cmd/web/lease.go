package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/metrics"
)

// contender is this process's side of the engine lease: the keeper that claims and renews it, the
// gate every lease-guarded unit of work passes, and the desk that fixes the role at the claim
// and reports it.
type contender struct {
	keeper *lease.Keeper
	gate   *gate.Gate
	desk   *desk.Desk
	quotes *desk.Quotes
	// promoted carries a standby's TookOver from the keeper's goroutine, which must not block,
	// to serve's wait loop, which starts the holder's parts.
	promoted chan lease.Event
}

// newContender builds the keeper, the gate and the desk. The desk needs the keeper, and the
// keeper's Notify needs the desk: Notify goes through the contender, whose desk is set before
// newContender returns — before anything can call the keeper's Claim, Run or Release, the only
// places it notifies from.
//
// watch is the holder's risk view (riskRelay): the gate refuses fills until it is loaded.
func newContender(cfg config.Config, st *stores, m *metrics.Metrics, quotes *desk.Quotes, watch gate.Watch, pid int, advertise string, log *slog.Logger) (*contender, error) {
	c := &contender{quotes: quotes, promoted: make(chan lease.Event, 1)}
	c.keeper = lease.New(st.holderDB, st.rdb, lease.Config{
		Key: lease.Key, Names: cfg.RedisNames, TTL: cfg.LeaseTTL, Fence: cfg.LeaseFence,
		Hostname: cfg.Hostname, PID: pid, AdvertiseURL: advertise, Instances: cfg.WebInstances,
		Standby:      cfg.Takeover == config.TakeoverStandby,
		Notify:       c.notify,
		ObserveRenew: m.ObserveRenew,
	}, log)
	m.WatchLease(c.keeper)
	// Every lease-guarded unit of work in this process passes this one gate; a fill also waits
	// for the risk view that will watch it.
	var err error
	if c.gate, err = gate.New(gate.Config{Lease: c.keeper, Watch: watch, Log: log, Dropped: m.GateDropped}); err != nil {
		return nil, err
	}
	tag := cfg.Hostname + ":" + strconv.Itoa(pid)
	if c.desk, err = desk.NewWeb(st.db, st.rdb, c.keeper, c.gate, desk.Config{Process: "web", CronMode: string(cfg.CronMode),
		Takeover: string(cfg.Takeover), Tag: tag, RedisNames: cfg.RedisNames}, log); err != nil {
		return nil, err
	}
	return c, nil
}

// notify is the keeper's event hook, on the keeper's goroutine. A standby's TookOver changes the
// role and the price view there and then; the holder's parts are started by serve's wait loop.
func (c *contender) notify(ev lease.Event) {
	c.desk.Notify(ev)
	if ev.Kind == lease.TookOver {
		// Before the lease is trusted: no desk-priced request is served at the old holder's last
		// published prices.
		c.quotes.StopFollowing()
		c.promoted <- ev
	}
}

// claim contends for the lease once, at boot, and returns the role it fixes for the process.
func (c *contender) claim(ctx context.Context) (desk.Role, error) {
	claimCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	role, err := c.desk.Claim(claimCtx)
	if err != nil {
		return "", fmt.Errorf("claim the engine lease: %w", err)
	}
	return role, nil
}
