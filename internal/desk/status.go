package desk

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/lease"
	"fxdesk/internal/mirror"
)

// Status is what /api/admin/fx/desk reports: this process's role and why, its own view of the
// lease, and what the two arbiters say right now.
type Status struct {
	Process     string `json:"process"`
	Role        Role   `json:"role"`
	Reason      string `json:"reason"`
	ThisProcess string `json:"thisProcess"` // hostname:pid of the process answering; the lease holder is under holder
	CronMode    string `json:"cronMode"`
	// Takeover is FXDESK_TAKEOVER of a web process (never or standby); empty on fxdesk-cron.
	Takeover string     `json:"takeover,omitempty"`
	Lease    *LeaseView `json:"lease"` // nil on the cron process
	Holder   HolderView `json:"holder"`
	// Mirror is the quote mirror: publishing on a holder with CRON_MODE=off, following on
	// fxdesk-cron, absent elsewhere.
	Mirror *mirror.Status `json:"mirror"`
	Time   time.Time      `json:"time"`
}

// LeaseView is this process's own view of its hold.
type LeaseView struct {
	Key             string        `json:"key"`
	InstanceID      string        `json:"instanceId"`
	Trusted         bool          `json:"holdsLease"` // the gate admits work now
	Arbiter         lease.Arbiter `json:"arbiter,omitempty"`
	Term            int64         `json:"term"`
	TrustLeftMs     int64         `json:"trustLeftMs"`
	Lost            bool          `json:"lost"`
	FailOpen        bool          `json:"failOpen"`
	LastRenewAgoMs  int64         `json:"lastRenewAgoMs"`
	LastRenewTookMs float64       `json:"lastRenewTookMs"` // how long the last renew took
	LastError       string        `json:"lastError,omitempty"`
}

// HolderView is what the two arbiters say, side by side.
type HolderView struct {
	Row        *RowView `json:"row"` // nil when there is no row or it cannot be read
	RowError   string   `json:"rowError,omitempty"`
	Redis      string   `json:"redis"` // hostname:pid, empty when the key is absent
	RedisTTLMs int64    `json:"redisTtlMs"`
	RedisError string   `json:"redisError,omitempty"`
	// Agree is false when both arbiters answered and name different holders.
	Agree bool `json:"agree"`
}

// RowView is the engine_lease row.
type RowView struct {
	Hostname    string `json:"hostname"`
	PID         int    `json:"pid"`
	Term        int64  `json:"term"`
	Live        bool   `json:"live"`
	ExpiresInMs int64  `json:"expiresInMs"`
	// AdvertiseURL is where the holder answers; followers forward desk-priced requests there.
	AdvertiseURL string `json:"advertiseUrl,omitempty"`
}

// Status reads the lease row and the Redis key now; each read is bounded so a dead store shows as
// an error instead of hanging the page.
func (d *Desk) Status(ctx context.Context) Status {
	d.mu.Lock()
	s := Status{Process: d.process, Role: d.role, Reason: d.reason, ThisProcess: d.tag, CronMode: d.cronMode, Takeover: d.takeover, Time: time.Now().UTC()}
	mirrorStatus := d.mirror
	d.mu.Unlock()
	if mirrorStatus != nil {
		ms := mirrorStatus()
		s.Mirror = &ms
	}

	if d.keeper != nil {
		st := d.keeper.State()
		s.Lease = &LeaseView{
			Key: lease.Key, InstanceID: st.InstanceID, Trusted: st.Trusted, Arbiter: st.Arbiter, Term: st.Term,
			TrustLeftMs: st.TrustLeft.Milliseconds(), Lost: st.Lost, FailOpen: st.FailOpen,
			LastRenewAgoMs: st.LastRenewAgo.Milliseconds(), LastRenewTookMs: float64(st.LastRenewTook.Microseconds()) / 1000,
			LastError: st.LastError,
		}
		if st.Lost {
			s.Reason = "lease lost: another process took the engine lease; this process keeps serving but its gate stays shut — restart it"
		}
	}

	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	h, expiresIn, ok, err := lease.ReadRow(rctx, d.db, lease.Key)
	switch {
	case err != nil:
		s.Holder.RowError = err.Error()
	case ok:
		s.Holder.Row = &RowView{Hostname: h.Hostname, PID: h.PID, Term: h.Term, Live: h.Live, ExpiresInMs: max(expiresIn, 0), AdvertiseURL: h.AdvertiseURL}
	}
	key := d.names.EngineLease(lease.Key)
	v, err := d.rdb.Get(rctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		s.Holder.RedisError = err.Error()
	default:
		s.Holder.Redis = v
		s.Holder.RedisTTLMs = d.rdb.PTTL(rctx, key).Val().Milliseconds()
	}
	s.Holder.Agree = true
	if s.Holder.RowError == "" && s.Holder.RedisError == "" {
		rowTag := ""
		if s.Holder.Row != nil && s.Holder.Row.Live {
			rowTag = h.String()
		}
		s.Holder.Agree = rowTag == s.Holder.Redis
	}
	return s
}
