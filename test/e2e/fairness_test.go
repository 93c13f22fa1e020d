package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/test/testenv"
)

// The waiting room against its attackers, as they meet it: over HTTP, through
// two service processes sharing one Redis and one database (issue 37).
//
// People react like people: they join at a random moment of the minute before
// the start (one in five only after it), poll at the pace the room tells,
// claim 0.2–1.5 s after their pass arrives, and one in ten never claims. Bots
// join in the last 150 ms before the start, poll every 100 ms, claim 20 ms
// after their pass, and try pass-less claims while they wait. One winner in
// five, of either kind, cancels a second after winning, so units come back
// to the sale during it.
//
// With the room, the bots' share of what was sold is their share of the
// line's claimers, within the binomial spread; every claim made with a valid
// pass got its unit; and units went down the line in order, the returned ones
// too: nobody who claimed was passed over for someone further back. Without
// the room (the control), the same bots take nearly everything, the returned
// units included.

const (
	fairStock   = 120
	fairPeople  = 240
	fairBots    = 240
	fairRate    = 60 // admitted per second
	fairPassTTL = 5  // seconds, the room's minimum
	fairLead    = 5 * time.Second
)

// fairUser is one account in the sale and what became of it.
type fairUser struct {
	id       domain.UserID
	token    string
	bot      bool
	noShow   bool // never claims
	late     bool // joins after the start
	canceler bool // cancels its order a second after winning

	inDraw   bool  // joined before the start (the room said so)
	position int64 // last place the room told, -1 before the draw
	admitted bool
	won      bool
	wonAt    time.Time
	refused  string // a claim with a valid pass answered this (never expected)
}

type fairSale struct {
	t        *testing.T
	c        *cluster
	procs    []*proc
	client   *http.Client
	vid      domain.VoucherID
	begin    time.Time
	room     bool
	users    []*fairUser
	mu       sync.Mutex
	cancels  int // winners that must still cancel
	canceled int
}

func TestRoomFairnessOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("a sale of 480 users over HTTP")
	}
	results := map[bool]fairResult{}
	for _, room := range []bool{true, false} {
		name := map[bool]string{true: "with_room", false: "without_room"}[room]
		t.Run(name, func(t *testing.T) {
			results[room] = runFairSale(t, room)
		})
	}
	with, without := results[true], results[false]
	if with.wins == 0 || without.wins == 0 {
		return // a subtest failed and said why
	}
	// The control shows what the room changes: without it the bots take far
	// more than their share of the line.
	if without.botShare < with.expected+3.5*with.sigma {
		t.Errorf("without the room bots took %.1f%%, within the room's spread (%.1f%% ± %.1f): the control shows no difference",
			100*without.botShare, 100*with.expected, 350*with.sigma)
	}
	t.Logf("returned units to bots: %.1f%% of %d with the room, %.1f%% of %d without",
		100*with.returnedBotShare, with.returned, 100*without.returnedBotShare, without.returned)
}

type fairResult struct {
	wins             int
	botShare         float64
	expected, sigma  float64
	returnedBotShare float64
	returned         int
}

func runFairSale(t *testing.T, room bool) fairResult {
	c := newCluster(t)
	s := &fairSale{t: t, c: c, room: room,
		procs:  []*proc{c.start("a", "SECKILL_CONSUMER=fair-a"), c.start("b", "SECKILL_CONSUMER=fair-b")},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}},
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 37))
	tokens := c.mint(fairPeople+fairBots, 1)
	for i, tok := range tokens {
		u := &fairUser{id: domain.UserID(i + 1), token: tok, bot: i >= fairPeople, position: -1}
		if !u.bot {
			u.noShow = rng.Float64() < 0.1
			u.late = rng.Float64() < 0.2
		}
		u.canceler = rng.Float64() < 0.2
		s.users = append(s.users, u)
	}
	s.begin = time.Now().Add(fairLead).Truncate(time.Millisecond)
	s.vid = s.create()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for i, u := range s.users {
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			if room {
				s.roomBuyer(ctx, u, i, r)
			} else {
				s.plainBuyer(ctx, u, i, r)
			}
		}()
	}
	// The sale is over when its whole stock is held by orders and every
	// winner who meant to cancel has: nothing is left to hand out.
	testenv.Eventually(t, 90*time.Second, func() (bool, string) {
		held := s.held()
		s.mu.Lock()
		defer s.mu.Unlock()
		return held == fairStock && s.canceled == s.cancels && time.Now().After(s.begin),
			fmt.Sprintf("%d units held by orders, %d of %d cancels done", held, s.canceled, s.cancels)
	})
	stop()
	wg.Wait()
	return s.judge()
}

// create makes the sale, with or without its room, beginning at s.begin.
func (s *fairSale) create() domain.VoucherID {
	t := s.t
	body := map[string]any{
		"shopId": 1, "title": "fairness", "payValue": 1, "actualValue": 2, "type": 1, "stock": fairStock,
		"beginTime": s.begin.UTC().Format(time.RFC3339Nano), "endTime": s.begin.Add(time.Hour).UTC().Format(time.RFC3339),
	}
	if s.room {
		body["waitingRoom"] = map[string]any{"opensBeforeSeconds": 60, "admitPerSecond": fairRate, "passTtlSeconds": fairPassTTL}
	}
	p := s.procs[0]
	status, env := call(t, http.DefaultClient, http.MethodPost, p.base+"/voucher/seckill", p.admin, body)
	var id string
	if status != http.StatusOK || !env.Success || json.Unmarshal(env.Data, &id) != nil {
		t.Fatalf("create voucher: %d %+v", status, env)
	}
	n, _ := strconv.ParseInt(id, 10, 64)
	return domain.VoucherID(n)
}

// held counts the orders that hold a unit in MySQL.
func (s *fairSale) held() int {
	var n int
	err := s.c.db.QueryRowContext(context.Background(),
		"SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ? AND status NOT IN (4, 5, 6)", int64(s.vid)).Scan(&n)
	if err != nil {
		s.t.Error(err)
	}
	return n
}

// roomAnswer is a join's or a poll's data.
type roomAnswer struct {
	Ticket      string `json:"ticket"`
	State       string `json:"state"`
	Position    int64  `json:"position"`
	InDraw      bool   `json:"inDraw"`
	PollAfterMs int64  `json:"pollAfterMs"`
	Pass        string `json:"pass"`
}

// send is one request of a user; it returns the status, the envelope and
// the Retry-After the service asked for (0 when none).
func (s *fairSale) send(ctx context.Context, method, url string, u *fairUser, header map[string]string) (int, envelope, time.Duration) {
	req, err := http.NewRequestWithContext(ctx, method, url, http.NoBody)
	if err != nil {
		s.t.Error(err)
		return 0, envelope{}, 0
	}
	req.Header.Set("authorization", u.token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, envelope{}, 100 * time.Millisecond // the test ending, or a busy loopback: try again
	}
	defer resp.Body.Close()
	var env envelope
	_ = json.NewDecoder(resp.Body).Decode(&env)
	after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return resp.StatusCode, env, time.Duration(after) * time.Second
}

// wait is a user's pause (a reaction, a poll interval): false when the sale
// ended meanwhile.
func wait(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// joinAt is when a user joins: people over the minute before the start
// (the room opened 60 s before it, the test only gives them the lead it has),
// late ones in the two seconds after it, bots in the last 150 ms before it.
func (s *fairSale) joinAt(u *fairUser, r *rand.Rand) time.Time {
	switch {
	case u.bot:
		return s.begin.Add(-between(r, 0, 150*time.Millisecond))
	case u.late:
		return s.begin.Add(between(r, 0, 2*time.Second))
	default:
		return s.begin.Add(-between(r, 500*time.Millisecond, fairLead-500*time.Millisecond))
	}
}

func (s *fairSale) roomBuyer(ctx context.Context, u *fairUser, i int, r *rand.Rand) {
	poller, claimer := s.procs[i%2], s.procs[(i+1)%2] // the pass is good on every instance
	room := fmt.Sprintf("%s/voucher-order/room/%d", poller.base, s.vid)
	claimURL := fmt.Sprintf("%s/voucher-order/seckill/%d", claimer.base, s.vid)
	if !wait(ctx, time.Until(s.joinAt(u, r))) {
		return
	}
	var st roomAnswer
	for {
		status, env, after := s.send(ctx, http.MethodPost, room+"/join", u, nil)
		if status == http.StatusOK && env.Success && json.Unmarshal(env.Data, &st) == nil {
			break
		}
		if !wait(ctx, max(after, 100*time.Millisecond)) {
			return
		}
	}
	s.mu.Lock()
	u.inDraw = st.State == "pre_queue"
	s.mu.Unlock()
	if u.noShow {
		return // joined, and never came back: the pass lapses
	}
	nextPassless := time.Now()
	for {
		s.mu.Lock()
		if st.State != "pre_queue" {
			u.position = st.Position
		}
		s.mu.Unlock()
		if st.State == "admitted" && st.Pass != "" {
			s.mu.Lock()
			u.admitted = true
			s.mu.Unlock()
			react := 20 * time.Millisecond
			if !u.bot {
				react = between(r, 200*time.Millisecond, 1500*time.Millisecond)
			}
			if !wait(ctx, react) {
				return
			}
			s.claim(ctx, u, claimURL, map[string]string{"X-Room-Pass": st.Pass}, true)
			return
		}
		if st.State == "expired" {
			return
		}
		if u.bot && time.Now().After(nextPassless) {
			// Bots try their luck without a pass: refused, at no Redis cost.
			if status, env, _ := s.send(ctx, http.MethodPost, claimURL, u, nil); status == http.StatusOK && env.Success {
				s.t.Errorf("bot %d claimed without a pass: %+v", u.id, env)
			}
			nextPassless = time.Now().Add(500 * time.Millisecond)
		}
		pause := min(max(time.Duration(st.PollAfterMs)*time.Millisecond, 100*time.Millisecond), time.Second)
		if u.bot {
			pause = 100 * time.Millisecond
		}
		if !wait(ctx, pause) {
			return
		}
		for {
			url := fmt.Sprintf("%s?ticket=%s", room, st.Ticket)
			status, env, after := s.send(ctx, http.MethodGet, url, u, nil)
			var next roomAnswer
			if status == http.StatusOK && env.Success && json.Unmarshal(env.Data, &next) == nil {
				next.Ticket = st.Ticket
				st = next
				break
			}
			if !wait(ctx, max(after, 100*time.Millisecond)) {
				return
			}
		}
	}
}

// plainBuyer is the control, a sale without a room: bots fire at the start
// and again every 20 ms until they win; people see the sale open, react in
// 0.2–1.5 s, and press again every two seconds while it says sold out (a
// unit may come back).
func (s *fairSale) plainBuyer(ctx context.Context, u *fairUser, i int, r *rand.Rand) {
	if u.noShow {
		return
	}
	url := fmt.Sprintf("%s/voucher-order/seckill/%d", s.procs[i%2].base, s.vid)
	start, again := s.begin.Add(between(r, 200*time.Millisecond, 1500*time.Millisecond)), 2*time.Second
	if u.bot {
		start, again = s.begin.Add(-between(r, 0, 150*time.Millisecond)), 20*time.Millisecond
	}
	if !wait(ctx, time.Until(start)) {
		return
	}
	for !s.claim(ctx, u, url, nil, false) {
		if !wait(ctx, again) {
			return
		}
	}
}

// claim makes one claim (retrying what the service asks to be retried) and
// says whether the user is done: won, or refused for good. withPass marks a
// claim with a valid pass, which must never be refused sold_out.
func (s *fairSale) claim(ctx context.Context, u *fairUser, url string, header map[string]string, withPass bool) bool {
	for {
		status, env, after := s.send(ctx, http.MethodPost, url, u, header)
		switch {
		case status == http.StatusOK && env.Success:
			var id string
			_ = json.Unmarshal(env.Data, &id)
			s.won(ctx, u, url, id)
			return true
		case status == http.StatusOK && withPass && env.Code != "":
			s.mu.Lock()
			u.refused = env.Code
			s.mu.Unlock()
			return true
		case status == http.StatusOK && (env.Code == "sold_out" || env.Code == "not_started"):
			return false // the control presses again
		case status == http.StatusOK:
			s.t.Errorf("user %d: claim answered %q", u.id, env.Code)
			return true
		}
		if !wait(ctx, max(after, 50*time.Millisecond)) { // 429 or 503: as asked
			return true
		}
	}
}

// won records a win and, for a canceler, cancels the order a second later
// (retrying while it is still queued), so its unit comes back to the sale.
func (s *fairSale) won(ctx context.Context, u *fairUser, claimURL, id string) {
	s.mu.Lock()
	u.won, u.wonAt = true, time.Now()
	if u.canceler {
		s.cancels++
	}
	s.mu.Unlock()
	if !u.canceler || !wait(ctx, time.Second) {
		return
	}
	base := claimURL[:len(claimURL)-len(fmt.Sprintf("/voucher-order/seckill/%d", s.vid))]
	for {
		status, env, after := s.send(ctx, http.MethodPost, base+"/voucher-order/"+id+"/cancel", u, nil)
		if status == http.StatusOK && env.Success {
			s.mu.Lock()
			s.canceled++
			s.mu.Unlock()
			return
		}
		if !wait(ctx, max(after, 100*time.Millisecond)) {
			return
		}
	}
}

func (s *fairSale) judge() fairResult {
	t := s.t
	var res fairResult
	var wins []*fairUser
	drawnClaimers, drawnBots := 0, 0
	for _, u := range s.users {
		if u.won {
			wins = append(wins, u)
		}
		if u.refused != "" {
			t.Errorf("user %d (bot %v) claimed with a valid pass and was told %q: an admitted place must be worth a unit", u.id, u.bot, u.refused)
		}
		if u.inDraw && !u.noShow {
			drawnClaimers++
			if u.bot {
				drawnBots++
			}
		}
	}
	slices.SortFunc(wins, func(a, b *fairUser) int { return a.wonAt.Compare(b.wonAt) })
	botWins, returnedBotWins := 0, 0
	for i, u := range wins {
		if u.bot {
			botWins++
			if i >= fairStock {
				returnedBotWins++
			}
		}
	}
	res.wins, res.returned = len(wins), len(wins)-fairStock
	res.botShare = float64(botWins) / float64(len(wins))
	if res.returned > 0 {
		res.returnedBotShare = float64(returnedBotWins) / float64(res.returned)
	}
	// The line's claimers: those in the draw who came back to claim. Units
	// run out inside the draw, so the late joiners' places never come up.
	if drawnClaimers == 0 { // the control: no line, nothing expected
		drawnClaimers = 1
	}
	res.expected = float64(drawnBots) / float64(drawnClaimers)
	res.sigma = math.Sqrt(res.expected * (1 - res.expected) / float64(len(wins)))
	if s.room {
		t.Logf("%d wins (%d of them returned units); bots took %.1f%% (of the returned units %.1f%%); their share of the line's claimers %.1f%% ± %.1f at 3.5σ",
			len(wins), res.returned, 100*res.botShare, 100*res.returnedBotShare, 100*res.expected, 350*res.sigma)
	} else {
		t.Logf("%d wins (%d of them returned units); bots took %.1f%% (of the returned units %.1f%%)",
			len(wins), res.returned, 100*res.botShare, 100*res.returnedBotShare)
	}
	if len(wins) != fairStock+s.canceled {
		t.Errorf("%d wins; want the stock %d plus the %d units cancelled back", len(wins), fairStock, s.canceled)
	}
	if b := s.c.books(s.vid); b.dbStock != 0 || b.redisStock != 0 || b.orders != len(wins) || b.users != len(wins) {
		t.Errorf("books: %+v; want nothing left and one order per win (%d)", b, len(wins))
	}
	if !s.room {
		return res
	}
	if math.Abs(res.botShare-res.expected) > 3.5*res.sigma {
		t.Errorf("bots took %.1f%% of the units; their share of the line is %.1f%% ± %.1f (3.5σ)", 100*res.botShare, 100*res.expected, 350*res.sigma)
	}
	// Down the line in order, returned units too: everyone who would claim
	// and was never admitted stood behind every winner.
	var lastWin int64 = -1
	for _, u := range wins {
		lastWin = max(lastWin, u.position)
	}
	for _, u := range s.users {
		if !u.noShow && !u.admitted && u.position >= 0 && u.position < lastWin {
			t.Errorf("user %d (bot %v) at place %d was never admitted, though a winner stood at place %d", u.id, u.bot, u.position, lastWin)
		}
	}
	return res
}
