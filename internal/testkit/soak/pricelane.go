package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"fxdesk/internal/auth"
	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/soak/invariant"
)

// The price lane (docs/soak.md, «The price lane»): the desk quotes from two feed simulators with
// one market seed, primary and backup (FXDESK_PRICE_SOURCES), and this lane, from a generator of
// its own, plays faults on them through their control APIs while it listens to what the holder
// publishes, samples which source each symbol is quoted from, and collects what the desk says it
// filtered. The invariants are invariant.CheckPrices.

var priceFaultKinds = []string{invariant.PriceSpike, invariant.PricePrimarySilent, invariant.PriceBothSilent, invariant.PriceOffset, invariant.PricePrimaryDown}

func isPriceFault(kind string) bool {
	for _, k := range priceFaultKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// marketSeedOf is the market seed both feed simulators get: the walk is a function of (seed,
// symbol, wall-clock step), so they quote one market.
func marketSeedOf(seed uint64) uint64 { return seed>>1 | 1 }

// priceSources is the desk's FXDESK_PRICE_SOURCES: the primary first.
func (c *cluster) priceSources() string {
	return invariant.SourcePrimary + "=" + c.feed.url + "," + invariant.SourceBackup + "=" + c.backup.url
}

// source is the feed simulator of a source name.
func (c *cluster) source(name string) *sim {
	if name == invariant.SourceBackup {
		return c.backup
	}
	return c.feed
}

// priceSchedule draws the price lane's faults: every kind once in a seeded order while there is
// room, then at random, 4–8 s apart from 6 s in, one at a time.
func priceSchedule(seed uint64, d time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e1ce5a4))
	return drawLane(rng, priceFaultKinds, 6*time.Second, 4000*time.Millisecond, 4000, d, func(f *fault) {
		sign := float64(1 - 2*rng.IntN(2))
		switch f.Kind {
		case invariant.PriceSpike:
			f.Source = []string{invariant.SourcePrimary, invariant.SourceBackup}[rng.IntN(2)]
			f.Symbol = soakSymbols[rng.IntN(len(soakSymbols))].symbol
			f.Pips = sign * float64(200+rng.IntN(201))
			f.HoldFor = time.Duration(30+rng.IntN(71)) * time.Millisecond
		case invariant.PricePrimarySilent:
			f.Source = invariant.SourcePrimary
			f.HoldFor = time.Duration(3000+rng.IntN(5000)) * time.Millisecond
		case invariant.PriceBothSilent:
			f.HoldFor = time.Duration(2000+rng.IntN(3000)) * time.Millisecond
		case invariant.PriceOffset:
			f.Source = []string{invariant.SourcePrimary, invariant.SourceBackup}[rng.IntN(2)]
			f.Pips = sign * float64(60+rng.IntN(91))
			f.HoldFor = time.Duration(3000+rng.IntN(3000)) * time.Millisecond
		case invariant.PricePrimaryDown:
			f.Source = invariant.SourcePrimary
			f.HoldFor = time.Duration(2000+rng.IntN(3000)) * time.Millisecond
		}
	})
}

// pipOfSymbol is a soak symbol's pip, 10^-(digits-1).
func pipOfSymbol(symbol string) float64 {
	for _, s := range soakSymbols {
		if s.symbol == symbol && s.digits == 3 {
			return 0.01
		}
	}
	return 0.0001
}

// simControl posts body to one of a simulator's control routes.
func simControl(p *sim, path string, body any) error {
	b, _ := json.Marshal(body)
	resp, err := httpClient.Post(p.control+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s on %s: %w", path, p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s on %s: status %d %s", path, p.name, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

// injectPrice plays one price fault and records it for the checks.
func (in *injector) injectPrice(ctx context.Context, f fault) {
	pf := invariant.PriceFault{Kind: f.Kind, Symbol: f.Symbol, Pips: f.Pips}
	wait := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	switch f.Kind {
	case invariant.PriceSpike:
		src := in.c.source(f.Source)
		pf.Sources = []string{f.Source}
		bid, ask, err := simPrice(src, f.Symbol)
		if err != nil {
			in.fail("%s: %v", f.Kind, err)
			return
		}
		pf.Ref = (bid + ask) / 2
		pf.Price = pf.Ref + f.Pips*pipOfSymbol(f.Symbol)
		pf.Start = time.Now()
		if err := simControl(src, "/control/spike", map[string]any{"symbol": f.Symbol, "pips": f.Pips, "ms": f.HoldFor.Milliseconds()}); err != nil {
			in.fail("%s: %v", f.Kind, err)
			return
		}
		pf.End = time.Now().Add(f.HoldFor)
	case invariant.PricePrimarySilent, invariant.PriceBothSilent:
		srcs := []string{invariant.SourcePrimary}
		if f.Kind == invariant.PriceBothSilent {
			srcs = append(srcs, invariant.SourceBackup)
		}
		pf.Sources = srcs
		pf.Start = time.Now()
		for _, s := range srcs {
			if err := simControl(in.c.source(s), "/control/silence", map[string]any{"symbol": "*", "seconds": f.HoldFor.Seconds()}); err != nil {
				in.fail("%s: %v", f.Kind, err)
			}
		}
		wait(f.HoldFor)
		for _, s := range srcs {
			if err := simControl(in.c.source(s), "/control/silence", map[string]any{"symbol": "*", "seconds": 0}); err != nil {
				in.fail("%s lift: %v", f.Kind, err)
			}
		}
		pf.End = time.Now()
	case invariant.PriceOffset:
		src := in.c.source(f.Source)
		pf.Sources = []string{f.Source}
		pf.Start = time.Now()
		if err := simControl(src, "/control/offset", map[string]any{"symbol": "*", "pips": f.Pips}); err != nil {
			in.fail("%s: %v", f.Kind, err)
			return
		}
		wait(f.HoldFor)
		if err := simControl(src, "/control/offset", map[string]any{"symbol": "*", "pips": 0}); err != nil {
			in.fail("%s back to 0: %v", f.Kind, err)
		}
		pf.End = time.Now()
	case invariant.PricePrimaryDown:
		src := in.c.source(invariant.SourcePrimary)
		pf.Sources = []string{invariant.SourcePrimary}
		pf.Start = time.Now()
		for until := pf.Start.Add(f.HoldFor); time.Now().Before(until) && ctx.Err() == nil; wait(150 * time.Millisecond) {
			if err := simControl(src, "/control/disconnect", map[string]any{}); err != nil {
				in.fail("%s: %v", f.Kind, err)
				break
			}
		}
		pf.End = time.Now()
	}
	in.note(invariant.Window{Kind: f.Kind, Start: pf.Start, End: pf.End, Note: f.String()})
	in.prices.fault(pf)
}

// priceWatch is what the price lane observes of the desk.
type priceWatch struct {
	c *cluster
	s *sampler

	mu         sync.Mutex
	faults     []invariant.PriceFault
	published  []invariant.PublishedTick
	filtered   map[invariant.FilteredTick]int // a tick without its outcome → its index in order
	order      []invariant.FilteredTick
	selections []invariant.SelectionSample
	heardFrom  time.Time
	heardTo    time.Time
	errs       map[string]int // what went wrong reading, by route, for the run log
}

func newPriceWatch(c *cluster, s *sampler) *priceWatch {
	return &priceWatch{c: c, s: s, filtered: map[invariant.FilteredTick]int{}, errs: map[string]int{}}
}

func (w *priceWatch) fault(f invariant.PriceFault) {
	w.mu.Lock()
	w.faults = append(w.faults, f)
	w.mu.Unlock()
}

// run listens and samples until ctx ends.
func (w *priceWatch) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.listen(ctx) })
	wg.Go(func() {
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			w.sampleSelection(ctx)
			if n++; n%3 == 0 {
				w.readFiltered(ctx)
			}
		}
	})
	wg.Wait()
	w.readFiltered(context.Background())
}

// listen hears every tick the holder publishes for the follower web processes, straight from
// Redis (not through the proxy the cuts cut): the desk's published prices.
func (w *priceWatch) listen(ctx context.Context) {
	sub := w.c.rdb.Subscribe(ctx, redisname.Names{}.Ticks())
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		w.noteErr("subscribe ticks")
		return
	}
	w.mu.Lock()
	w.heardFrom = time.Now()
	w.mu.Unlock()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.heardTo = time.Now()
			w.mu.Unlock()
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			var t struct {
				Symbol     string    `json:"symbol"`
				Source     string    `json:"source"`
				Bid        string    `json:"bid"`
				Ask        string    `json:"ask"`
				ReceivedAt time.Time `json:"receivedAt"`
				Term       int64     `json:"term"`
			}
			if json.Unmarshal([]byte(m.Payload), &t) != nil {
				w.noteErr("decode tick")
				continue
			}
			bid, e1 := strconv.ParseFloat(t.Bid, 64)
			ask, e2 := strconv.ParseFloat(t.Ask, 64)
			if e1 != nil || e2 != nil {
				w.noteErr("decode tick")
				continue
			}
			w.mu.Lock()
			w.published = append(w.published, invariant.PublishedTick{Symbol: t.Symbol, Source: t.Source, Bid: bid, Ask: ask, At: t.ReceivedAt, Term: t.Term})
			w.mu.Unlock()
		}
	}
}

func (w *priceWatch) noteErr(what string) {
	w.mu.Lock()
	w.errs[what]++
	w.mu.Unlock()
}

// getHolder GETs path from the holder with the viewer's token (the routes need `read`).
func (w *priceWatch) getHolder(ctx context.Context, path string, into any) (pid int, sent, recv time.Time, ok bool) {
	h := w.s.currentHolder()
	if h == nil || h.isStopped() {
		return 0, sent, recv, false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+w.c.staff[auth.RoleViewer])
	sent = time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, sent, recv, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		w.noteErr(fmt.Sprintf("GET %s: %d", strings.SplitN(path, "?", 2)[0], resp.StatusCode))
		return 0, sent, recv, false
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		w.noteErr("decode " + strings.SplitN(path, "?", 2)[0])
		return 0, sent, recv, false
	}
	return h.pid, sent, time.Now(), true
}

// sampleSelection records which source the holder quotes each symbol from.
func (w *priceWatch) sampleSelection(ctx context.Context) {
	var b struct {
		Symbols []struct {
			Symbol string `json:"symbol"`
			Source string `json:"source"`
			Health []struct {
				Source        string `json:"source"`
				Healthy       bool   `json:"healthy"`
				Reason        string `json:"reason"`
				SilentAfterMs int64  `json:"silentAfterMs"`
			} `json:"health"`
		} `json:"symbols"`
	}
	pid, sent, recv, ok := w.getHolder(ctx, "/api/admin/fx/price-sources", &b)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range b.Symbols {
		smp := invariant.SelectionSample{PID: pid, Sent: sent, Recv: recv, Symbol: s.Symbol, Source: s.Source}
		for _, h := range s.Health {
			smp.Health = append(smp.Health, invariant.SourceHealthSample{Source: h.Source, Healthy: h.Healthy, Reason: h.Reason, SilentAfter: time.Duration(h.SilentAfterMs) * time.Millisecond})
		}
		w.selections = append(w.selections, smp)
	}
}

// readFiltered adds the holder's last filtered ticks to what the soak has collected (each holder
// keeps its own bounded list: read every second, nothing is lost but a flood's overflow).
func (w *priceWatch) readFiltered(ctx context.Context) {
	var b struct {
		Rejected []invariant.FilteredTick `json:"rejected"`
	}
	if _, _, _, ok := w.getHolder(ctx, "/api/admin/fx/price-sources/rejected?limit=1000", &b); !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range b.Rejected {
		k := t
		k.Outcome, k.DecidedAt = "", time.Time{}
		if i, ok := w.filtered[k]; ok {
			w.order[i] = t // the same tick, decided since: its latest outcome
			continue
		}
		w.filtered[k] = len(w.order)
		w.order = append(w.order, t)
	}
}

// evidence is what the lane saw so far.
func (w *priceWatch) evidence() *invariant.PriceEvidence {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &invariant.PriceEvidence{Faults: append([]invariant.PriceFault(nil), w.faults...), Published: append([]invariant.PublishedTick(nil), w.published...),
		Filtered: append([]invariant.FilteredTick(nil), w.order...), Selections: append([]invariant.SelectionSample(nil), w.selections...),
		HeardFrom: w.heardFrom, HeardTo: w.heardTo}
}

// write keeps what the lane saw in the run folder, one JSON object a line in the order heard:
// {"fault":…}, {"published":…} (bid and ask as the desk sent them), {"filtered":…} with its last
// outcome, {"selection":…}. A failed check names prices and times; this is what to read them
// against (which source the desk published, what it held, which source each symbol was on).
func (w *priceWatch) write(path string) error {
	ev := w.evidence()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b := bufio.NewWriter(f)
	enc := json.NewEncoder(b)
	type published struct {
		invariant.PublishedTick
		Bid float64 `json:"bid"`
		Ask float64 `json:"ask"`
	}
	for _, x := range ev.Faults {
		enc.Encode(map[string]any{"fault": x})
	}
	for _, x := range ev.Published {
		enc.Encode(map[string]any{"published": published{x, x.Bid, x.Ask}})
	}
	for _, x := range ev.Filtered {
		enc.Encode(map[string]any{"filtered": x})
	}
	for _, x := range ev.Selections {
		enc.Encode(map[string]any{"selection": x})
	}
	if err := b.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// describe is the lane's tally for the run log: ticks heard, filtered ticks by outcome, samples,
// read troubles.
func (w *priceWatch) describe() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	outcomes := map[string]int{}
	for _, t := range w.order {
		outcomes[t.Source+" "+t.Reason+" "+t.Outcome]++
	}
	return fmt.Sprintf("%d published ticks heard, %d selection samples, filtered %v, read troubles %v", len(w.published), len(w.selections), outcomes, w.errs)
}
