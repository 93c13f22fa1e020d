package application_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
)

// The measured fairness (issue 27, item 4): 1,000 bots fire at the
// exact start with 50 connections each, 1,000 people arrive spread over the
// 30 s before it, and the stock is 1,000. Without a room the bots take it
// all; with one, their share of the stock is their share of the joiners.
const (
	fairBots   = 1000
	fairPeople = 1000
	fairConns  = 50
	fairStock  = 1000
	fairLate   = 200 // joiners after the start, who queue first come, first served
)

func isBot(u domain.UserID) bool { return u > fairPeople && u <= fairPeople+fairBots }

// fairArrivals are the people's arrival times: spread over the 30 s before
// begin, in order.
func fairArrivals(begin time.Time) []time.Time {
	r := rand.New(rand.NewPCG(27, 1))
	at := make([]time.Time, fairPeople)
	for i := range at {
		at[i] = begin.Add(-time.Duration(r.Int64N(int64(30 * time.Second))))
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	return at
}

// fire runs n calls of f over a pool of goroutines (the bots' connections).
func fire(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func TestFairnessWithoutRoomBotsTakeTheStock(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, fairStock, begin, domain.RoomRules{})
	claim := application.NewClaimSeckill(memory.NewIDs(w.clock), chanqueue.NewAdmission(w.gate, chanqueue.New(fairBots*fairConns, 0)))
	won := map[bool]int{}
	var mu sync.Mutex
	try := func(u domain.UserID) {
		if _, err := claim.Handle(ctx, u, id); err == nil {
			mu.Lock()
			won[isBot(u)]++
			mu.Unlock()
		}
	}
	// People press early and are told the sale has not started; each
	// presses again a human reaction after the start.
	for i, at := range fairArrivals(begin) {
		w.clock.Set(at)
		if _, err := claim.Handle(ctx, domain.UserID(i+1), id); !errors.Is(err, domain.ErrNotStarted) {
			t.Fatalf("an early claim: %v; want not_started", err)
		}
	}
	w.clock.Set(begin)
	fire(fairBots*fairConns, func(i int) { try(domain.UserID(fairPeople + 1 + i%fairBots)) })
	w.clock.Set(begin.Add(200 * time.Millisecond))
	for u := domain.UserID(1); u <= fairPeople; u++ {
		try(u)
	}
	share := float64(won[true]) / fairStock
	t.Logf("without a room: bots won %d of %d units (%.1f%%), people %d; bots are %.0f%% of the buyers",
		won[true], fairStock, 100*share, won[false], 100*float64(fairBots)/float64(fairBots+fairPeople))
	if share < 0.9 {
		t.Fatalf("without a room the bots won only %.1f%% of the stock; the comparison needs them to win most", 100*share)
	}
}

func TestFairnessWithRoom(t *testing.T) {
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, fairStock, begin, rules(t, time.Minute, 200, 30*time.Second, 0))
	claim := application.NewClaimSeckill(memory.NewIDs(w.clock), chanqueue.NewAdmission(w.gate, chanqueue.New(fairBots*fairConns, 0)))

	var mu sync.Mutex
	tickets := make(map[domain.UserID]string)
	joinOrder := make(map[domain.UserID]int) // the order of arrival in the pre-queue
	join := func(u domain.UserID) {
		st, err := w.room.Join(ctx, id, u)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if old, ok := tickets[u]; ok && old != st.Ticket {
			t.Errorf("bot %d got two places", u)
		}
		if _, ok := joinOrder[u]; !ok {
			joinOrder[u] = len(joinOrder)
		}
		tickets[u] = st.Ticket
	}
	for i, at := range fairArrivals(begin) {
		w.clock.Set(at)
		join(domain.UserID(i + 1))
	}
	// The bots at the exact start: the begin's millisecond is in the draw.
	w.clock.Set(begin)
	fire(fairBots*fairConns, func(i int) { join(domain.UserID(fairPeople + 1 + i%fairBots)) })
	if t.Failed() {
		t.FailNow()
	}
	// After the start, late joiners queue behind the draw, first come,
	// first served.
	late := make([]domain.UserID, fairLate)
	for i := range late {
		w.clock.Set(begin.Add(time.Duration(i+1) * time.Millisecond))
		late[i] = domain.UserID(fairPeople + fairBots + 1 + i)
		join(late[i])
	}

	// Everyone polls every RoomRefresh; whoever holds a pass claims with it
	// at once (a bot with all its connections).
	won := map[bool]int{}
	position := make(map[domain.UserID]int64)
	claimed := make(map[domain.UserID]bool)
	for step := 0; won[true]+won[false] < fairStock && step < 1000; step++ {
		w.clock.Advance(application.RoomRefresh)
		for u, tk := range tickets {
			if claimed[u] {
				continue
			}
			st, err := w.room.Poll(ctx, id, u, tk)
			if err != nil {
				t.Fatal(err)
			}
			if st.Position > 0 {
				position[u] = st.Position - 1
			}
			if st.Phase != application.RoomAdmitted {
				continue
			}
			claimed[u] = true
			p, err := w.room.Check(ctx, id, u, roomPass(st.Pass))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := claim.Handle(ctx, u, id); errors.Is(err, domain.ErrSoldOut) {
				continue // passes outnumber the stock once some are used
			} else if err != nil {
				t.Fatalf("user %d with a pass: %v", u, err)
			}
			if err := w.room.Used(ctx, id, u, p); err != nil {
				t.Fatal(err)
			}
			won[isBot(u)]++
		}
	}
	if won[true]+won[false] != fairStock {
		t.Fatalf("the room sold %d of %d", won[true]+won[false], fairStock)
	}
	botShare := float64(won[true]) / fairStock
	joinShare := float64(fairBots) / float64(fairBots+fairPeople) // of the draw, which sells out the stock
	// Rank correlation of the pre-queue's arrival order with its admission
	// order (≈ 0: the draw ignores who came first), and of the late
	// joiners' (= 1: first come, first served).
	var xs, ys []float64
	for u, j := range joinOrder {
		if j < fairBots+fairPeople {
			xs, ys = append(xs, float64(j)), append(ys, float64(position[u]))
		}
	}
	rhoDraw := spearman(xs, ys)
	xs, ys = nil, nil
	for i, u := range late {
		xs, ys = append(xs, float64(i)), append(ys, float64(position[u]))
	}
	rhoLate := spearman(xs, ys)
	t.Logf("with a room: bots won %d of %d units (%.1f%%), people %d; bots are %.1f%% of the pre-queue",
		won[true], fairStock, 100*botShare, won[false], 100*joinShare)
	t.Logf("rank correlation, pre-queue arrival vs admission: %.4f; after the start: %.4f", rhoDraw, rhoLate)
	if d := botShare - joinShare; d > 0.05 || d < -0.05 {
		t.Errorf("bots' share of the stock %.1f%% is not their share of the joiners %.1f%% (±5 points)", 100*botShare, 100*joinShare)
	}
	if rhoDraw > 0.1 || rhoDraw < -0.1 {
		t.Errorf("pre-queue arrival order correlates with admission order: ρ = %.3f", rhoDraw)
	}
	if rhoLate != 1 {
		t.Errorf("late joiners are not admitted first come, first served: ρ = %.3f", rhoLate)
	}
}

// spearman is the rank correlation of paired samples (ranks by value).
func spearman(xs, ys []float64) float64 {
	rank := func(v []float64) []float64 {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
		r := make([]float64, len(v))
		for k, i := range idx {
			r[i] = float64(k)
		}
		return r
	}
	rx, ry := rank(xs), rank(ys)
	n := float64(len(xs))
	var d2 float64
	for i := range rx {
		d := rx[i] - ry[i]
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// TestAPassIsWorthAUnitAgainstFasterBots is issue 37's sale: stock 300,
// passes of 10 s, 150 admitted per second, a line of 600 people, who claim
// 0.2–1.5 s after their pass arrives and one in ten never do, and 600 bots,
// who claim 20 ms after theirs; everyone joined before the start and polls
// every RoomRefresh. The cap once counted passes outstanding against the
// whole stock, so each used pass admitted someone new although its unit was
// gone, and a later-admitted bot beat an earlier-admitted person still
// reacting (63–72% of the stock to the bots, 71–98 people per run refused
// sold_out with a valid pass). Now passes outstanding never exceed what is
// left to sell:
//   - every claim made with a valid pass gets its unit, however slow;
//   - the bots' share of the units is their share of those in the line who
//     claim, within the binomial spread (3.5σ of 300 draws);
//   - exactly the stock is sold.
func TestAPassIsWorthAUnitAgainstFasterBots(t *testing.T) {
	const (
		stock, people, bots = 300, 600, 600
		ttl                 = 10 * time.Second
		botReaction         = 20 * time.Millisecond
	)
	ctx := context.Background()
	begin := now.Add(time.Minute)
	w := newRoomWorld(t, now)
	id := w.sale(t, stock, begin, rules(t, time.Minute, 150, ttl, 0))
	claim := application.NewClaimSeckill(memory.NewIDs(w.clock), chanqueue.NewAdmission(w.gate, chanqueue.New(stock*2, 0)))

	r := rand.New(rand.NewPCG(37, 1))
	type buyer struct {
		bot      bool
		never    bool
		reaction time.Duration
		ticket   string
		pass     string
		claimAt  time.Time // zero until the pass is seen
		done     bool
		// The first estimate seen while waiting: when admission was
		// predicted, by the room's estimate and by rate alone.
		predicted, byRate time.Time
	}
	buyers := map[domain.UserID]*buyer{}
	w.clock.Set(begin.Add(-30 * time.Second))
	for u := domain.UserID(1); u <= people+bots; u++ {
		b := &buyer{bot: u > people}
		if b.bot {
			b.reaction = botReaction
		} else {
			b.reaction = 200*time.Millisecond + time.Duration(r.Int64N(int64(1300*time.Millisecond)))
			b.never = r.IntN(10) == 0
		}
		st, err := w.room.Join(ctx, id, u)
		if err != nil {
			t.Fatal(err)
		}
		b.ticket = st.Ticket
		buyers[u] = b
	}

	won := map[bool]int{}
	refusedWithPass := 0
	var errs, rateErrs []time.Duration // |admission - first estimate| of those admitted after waiting
	const tick = 10 * time.Millisecond
	w.clock.Set(begin)
	// On until sold out and every pass seen has been used or let go: a
	// person still reacting when the last unit sells is part of the test.
	pending := func() bool {
		for _, b := range buyers {
			if !b.claimAt.IsZero() && !b.done {
				return true
			}
		}
		return false
	}
	for elapsed := time.Duration(0); elapsed < 60*time.Second && (won[true]+won[false] < stock || pending()); elapsed += tick {
		w.clock.Advance(tick)
		at := w.clock.Now()
		polls := elapsed%application.RoomRefresh == 0
		for u := domain.UserID(1); u <= people+bots; u++ {
			b := buyers[u]
			if b.done {
				continue
			}
			if polls && b.claimAt.IsZero() {
				st, err := w.room.Poll(ctx, id, u, b.ticket)
				if err != nil {
					t.Fatal(err)
				}
				if st.Phase == application.RoomWaiting && b.predicted.IsZero() {
					b.predicted = at.Add(st.Wait)
					b.byRate = at.Add(time.Duration(st.Ahead+1) * time.Second / 150)
				}
				if st.Phase == application.RoomAdmitted {
					b.pass, b.claimAt = st.Pass, at.Add(b.reaction)
					if !b.predicted.IsZero() {
						errs = append(errs, at.Sub(b.predicted).Abs())
						rateErrs = append(rateErrs, at.Sub(b.byRate).Abs())
					}
				}
			}
			if b.claimAt.IsZero() || at.Before(b.claimAt) {
				continue
			}
			b.done = true
			if b.never {
				continue
			}
			p, err := w.room.Check(ctx, id, u, roomPass(b.pass))
			if errors.Is(err, domain.ErrPassExpired) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			if _, err := claim.Handle(ctx, u, id); errors.Is(err, domain.ErrSoldOut) {
				refusedWithPass++
				continue
			} else if err != nil {
				t.Fatalf("user %d with a valid pass: %v", u, err)
			}
			if err := w.room.Used(ctx, id, u, p); err != nil {
				t.Fatal(err)
			}
			won[b.bot]++
		}
	}
	sold := won[true] + won[false]
	share := float64(won[true]) / float64(sold)
	claimers := 0 // people who claim when their turn comes
	for u := domain.UserID(1); u <= people; u++ {
		if !buyers[u].never {
			claimers++
		}
	}
	want := float64(bots) / float64(bots+claimers) // of those in the line who claim
	sigma := math.Sqrt(want * (1 - want) / float64(stock))
	// 3.5σ: a fair room fails one run in two thousand by chance; the old
	// cap's 63-72% is beyond it.
	t.Logf("bots won %d, people %d (bots' share %.1f%%, their share of the claiming line %.1f%% ± %.1f at 3.5σ); %d claims with a valid pass refused sold_out",
		won[true], won[false], 100*share, 100*want, 350*sigma, refusedWithPass)
	q := func(ds []time.Duration, f float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		sorted := append([]time.Duration(nil), ds...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		return sorted[int(f*float64(len(sorted)-1))]
	}
	t.Logf("wait estimate, |admission - first estimate| over %d admitted after waiting: median %s, p90 %s (by the rate alone: median %s, p90 %s)",
		len(errs), q(errs, .5), q(errs, .9), q(rateErrs, .5), q(rateErrs, .9))
	// On the fake clock: a poll every RoomRefresh sees an admission up to
	// one refresh late, so the error is that granularity unless the
	// estimate is wrong.
	if len(errs) == 0 || q(errs, .5) > 2*application.RoomRefresh {
		t.Errorf("the wait estimate's median error is %s over %d admissions; want within two polls (%s)", q(errs, .5), len(errs), 2*application.RoomRefresh)
	}
	if refusedWithPass > 0 {
		t.Errorf("%d claims with a valid pass were refused sold_out: an admitted place must be worth a unit", refusedWithPass)
	}
	if sold != stock {
		t.Errorf("sold %d of %d", sold, stock)
	}
	if math.Abs(share-want) > 3.5*sigma {
		t.Errorf("bots' share %.1f%% is not their share of the line %.1f%% (3.5σ = %.1f points)", 100*share, 100*want, 350*sigma)
	}
}
