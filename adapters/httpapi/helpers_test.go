package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/chanqueue"
	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/memory"
	"github.com/hmdp-go/seckill/adapters/metrics"
	"github.com/hmdp-go/seckill/application"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// zone is the server's configured zone in these tests: not UTC, so that a
// zone mix-up between parsing and formatting shows.
var zone = time.FixedZone("UTC+8", 8*3600)

// now is the fixed time the gate and the ID issuer see.
var now = time.Date(2026, 11, 29, 20, 30, 0, 0, zone)

// calls counts the calls that reach the driven ports, so a test can prove a
// request never reached a use case.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) hit(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *calls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

type spyVouchers struct {
	ports.VoucherRepository
	c *calls
	// listErr, when set, is what ListByShop fails with; listPanic makes it panic.
	listErr   error
	listPanic bool
}

func (s *spyVouchers) AddSeckill(ctx context.Context, v domain.Voucher) (domain.Voucher, error) {
	s.c.hit("vouchers.AddSeckill")
	return s.VoucherRepository.AddSeckill(ctx, v)
}

func (s *spyVouchers) AddSeckillOnce(ctx context.Context, key, fp string, v domain.Voucher, e domain.AuditEntry) (ports.Creation, error) {
	s.c.hit("vouchers.AddSeckillOnce")
	return s.VoucherRepository.AddSeckillOnce(ctx, key, fp, v, e)
}

func (s *spyVouchers) Get(ctx context.Context, id domain.VoucherID) (domain.Voucher, error) {
	s.c.hit("vouchers.Get")
	return s.VoucherRepository.Get(ctx, id)
}

func (s *spyVouchers) ListByShop(ctx context.Context, shop domain.ShopID, max int) ([]domain.Voucher, error) {
	s.c.hit("vouchers.ListByShop")
	if s.listPanic {
		panic("boom: secret panic detail")
	}
	if s.listErr != nil {
		return nil, s.listErr
	}
	return s.VoucherRepository.ListByShop(ctx, shop, max)
}

type spySaleOrders struct {
	ports.SaleOrders
	c *calls
}

func (s spySaleOrders) OrdersAfter(ctx context.Context, v domain.VoucherID, f domain.OrderFilter, after domain.OrderID, limit int) ([]domain.OrderStatus, error) {
	s.c.hit("orders.OrdersAfter")
	return s.SaleOrders.OrdersAfter(ctx, v, f, after, limit)
}

type spyAudit struct {
	ports.AuditLog
	c *calls
}

func (s spyAudit) List(ctx context.Context, q ports.AuditQuery) ([]domain.AuditEntry, error) {
	s.c.hit("audit.List")
	return s.AuditLog.List(ctx, q)
}

type spyGate struct {
	ports.StockGate
	c *calls
	// stall, when set, makes Return wait as a stalled Redis does: until
	// the request's context ends (and at once, with an error, when the
	// request set no deadline, so a missing budget shows as a 500).
	stall *atomic.Bool
}

func (s *spyGate) Return(ctx context.Context, orders []domain.VoucherOrder) error {
	s.c.hit("gate.Return")
	if err := stalled(ctx, s.stall); err != nil {
		return err
	}
	return s.StockGate.Return(ctx, orders)
}

// stalled waits out ctx when stall is set, as a command to a Redis that
// stopped answering does (go-redis honours the context's deadline).
func stalled(ctx context.Context, stall *atomic.Bool) error {
	if stall == nil || !stall.Load() {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		unboundedStalls.Add(1)
		return errors.New("a stalled backend was called without a deadline: it would wait forever")
	}
	<-ctx.Done()
	return fmt.Errorf("redis: %w", ctx.Err())
}

// unboundedStalls counts the calls to a stalled backend made without a
// deadline, each of which would have waited forever.
var unboundedStalls atomic.Int64

// stallAudit is the dashboard's view of the gate, stalled like spyGate.
type stallAudit struct {
	ports.GateAudit
	stall *atomic.Bool
}

func (s stallAudit) Stock(ctx context.Context, id domain.VoucherID) (int, bool, error) {
	if err := stalled(ctx, s.stall); err != nil {
		return 0, false, err
	}
	return s.GateAudit.Stock(ctx, id)
}

func (s *spyGate) Preheat(ctx context.Context, v domain.Voucher) error {
	s.c.hit("gate.Preheat")
	return s.StockGate.Preheat(ctx, v)
}

func (s *spyGate) Reserve(ctx context.Context, o domain.VoucherOrder) error {
	s.c.hit("gate.Reserve")
	return s.StockGate.Reserve(ctx, o)
}

func (s *spyGate) Release(ctx context.Context, o domain.VoucherOrder, restoreStock bool) error {
	s.c.hit("gate.Release")
	return s.StockGate.Release(ctx, o, restoreStock)
}

func (s *spyGate) Queued(ctx context.Context, u domain.UserID, id domain.OrderID) (domain.VoucherOrder, bool, error) {
	s.c.hit("gate.Queued")
	return s.StockGate.Queued(ctx, u, id)
}

type spyIDs struct {
	ports.OrderIDs
	c *calls
}

func (s *spyIDs) Next(ctx context.Context) (domain.OrderID, error) {
	s.c.hit("ids.Next")
	return s.OrderIDs.Next(ctx)
}

type spyAdmission struct {
	ports.Admission
	c *calls
}

func (s *spyAdmission) Admit(ctx context.Context, o domain.VoucherOrder) error {
	s.c.hit("admission.Admit")
	return s.Admission.Admit(ctx, o)
}

type spyOrders struct {
	ports.OrderRepository
	c *calls
	// find, when set, replaces Find.
	find func(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error)
}

func (s *spyOrders) Find(ctx context.Context, id domain.OrderID) (domain.OrderStatus, error) {
	s.c.hit("orders.Find")
	if s.find != nil {
		return s.find(ctx, id)
	}
	return s.OrderRepository.Find(ctx, id)
}

// sessionsFunc lets a test make the session store fail.
type sessionsFunc func(ctx context.Context, token string) (domain.UserID, error)

func (f sessionsFunc) UserID(ctx context.Context, token string) (domain.UserID, error) {
	return f(ctx, token)
}

// bearerFunc is a fake identity provider's verifier.
type bearerFunc func(ctx context.Context, token string) (domain.UserID, bool, error)

func (f bearerFunc) Session(ctx context.Context, token string) (domain.UserID, bool, error) {
	return f(ctx, token)
}

// fakeIdP knows three tokens: "jwt-admin" (user 7, admin by role),
// "jwt-user" (user 8) and "jwt-listed" (adminUser, no role).
var fakeIdP = bearerFunc(func(_ context.Context, token string) (domain.UserID, bool, error) {
	switch token {
	case "jwt-admin":
		return 7, true, nil
	case "jwt-user":
		return 8, false, nil
	case "jwt-listed":
		return adminUser, false, nil
	}
	return 0, false, ports.ErrUnknownToken
})

type options struct {
	// bearer is Deps.Bearer (fakeIdP, say); nil leaves it unset.
	bearer   ports.BearerSessions
	queueCap int
	noTokens bool
	ready    func(context.Context) error
	sessions ports.Sessions
	maxBody  int64
	quiet    bool // log at info, as production does
	// createdAt is the time the router checks new vouchers against; zero
	// means now, the time the gate and the ID issuer see.
	createdAt time.Time
	// admins replaces the default admin (adminUser); noAdmins leaves none.
	admins   []domain.UserID
	noAdmins bool
	limits   httpapi.Limits
	proxies  []netip.Prefix
	split    httpapi.SplitRule
	// admission wraps the claim's admission, to inject its failures.
	admission func(ports.Admission) ports.Admission
	// readTTL is Deps.PublicReadTTL; zero is the default.
	readTTL time.Duration
	// noPayments leaves SECKILL_PAYMENT_SECRET unset.
	noPayments bool
	// noRooms leaves the waiting rooms unmounted.
	noRooms bool
	// marks gives the claim this instance's sold-out marks (and so the
	// sold-out edge), on the env's clock, never expiring by themselves;
	// observer is Deps.ClaimObserver (nil: none).
	marks    bool
	observer httpapi.ClaimObserver
	// stall, when set, stalls the gate's Return and the dashboard's reads
	// of it, as a Redis that stopped answering.
	stall *atomic.Bool
}

// roomKey signs the waiting rooms' tickets and passes in these tests.
const roomKey = "test-room-key-0123456789abcdefghij"

// paySecret signs payment notifications in these tests; payWindow is the
// pay window of their orders.
const (
	paySecret = "test-payment-secret-0123456789"
	payWindow = 15 * time.Minute
)

// adminUser is the admin of every env unless a test says otherwise.
const adminUser = 900_001

// env is the router on the real use cases over the memory fakes and a real
// channel queue, with spies on every driven port.
type env struct {
	t        testing.TB
	h        http.Handler
	calls    *calls
	vouchers *spyVouchers
	stored   *memory.Vouchers
	orders   *spyOrders
	gate     *memory.Gate
	queue    *chanqueue.Queue
	fulfill  *application.FulfillOrders
	logs     *testenv.LogBuffer
	sessions *memory.Sessions
	// lookups counts session lookups, kept apart from calls because most
	// requests make one.
	lookups *atomic.Int64
	// adminToken is adminUser's login token, minted on first use.
	adminTok string
	// ledger is the orders under the spy; clock the gate's and the ids'.
	ledger *memory.Orders
	clock  *testenv.Clock
	// counter counts claim answers for the sale board (its Sample is the
	// once-a-second reading the service takes).
	counter *metrics.ClaimCounter
	rooms   *memory.Rooms
}

func newEnv(t testing.TB, opt options) *env {
	t.Helper()
	if opt.queueCap == 0 {
		opt.queueCap = 64
	}
	if opt.ready == nil {
		opt.ready = func(context.Context) error { return nil }
	}
	clock := testenv.NewClock(now)
	c := &calls{}
	gate := memory.NewGate(clock)
	queue := chanqueue.New(opt.queueCap, 0)
	t.Cleanup(func() { _ = queue.Close() })
	mv := memory.NewVouchers()
	vouchers := &spyVouchers{VoucherRepository: mv, c: c}
	ledger := memory.NewOrders(mv).WithPayWindow(payWindow)
	orders := &spyOrders{OrderRepository: ledger, c: c}
	counter := metrics.NewClaimCounter()
	sgate := &spyGate{StockGate: gate, c: c, stall: opt.stall}
	sessions := memory.NewSessions()
	rooms := memory.NewRooms(gate)
	roomDir := application.NewRoomDirectory(rooms, clock)
	room := application.NewWaitingRoom(roomDir, application.NewRoomSigner([]byte(roomKey)))

	logs := &testenv.LogBuffer{}
	level := zerolog.DebugLevel
	if opt.quiet {
		level = zerolog.InfoLevel
	}
	var stock ports.StockGate = sgate
	var marks *application.SoldOutMarks
	if opt.marks {
		marks = application.NewSoldOutMarks(application.MaxSoldOutWindow, clock)
		stock = marks.Gate(sgate)
	}
	var admission ports.Admission = chanqueue.NewAdmission(stock, queue)
	if opt.admission != nil {
		admission = opt.admission(admission)
	}
	d := httpapi.Deps{
		AddVoucher:   application.NewAddSeckillVoucher(vouchers, orders, application.NewRoomGate(stock, roomDir)),
		ListVouchers: application.NewListShopVouchers(vouchers),
		Claim: application.NewClaimSeckill(&spyIDs{OrderIDs: memory.NewIDs(clock), c: c},
			&spyAdmission{Admission: admission, c: c}).WithRooms(room).
			WithSoldOutMarks(marks).WithRecorder(counter),
		GetOrder:       application.NewGetOrder(orders, sgate),
		Sessions:       sessions,
		Tokens:         sessions,
		Ready:          opt.ready,
		Log:            zerolog.New(logs).Level(level),
		Location:       zone,
		MaxBodyBytes:   opt.maxBody,
		Clock:          clock,
		Admins:         []domain.UserID{adminUser},
		Limits:         opt.limits,
		TrustedProxies: opt.proxies,
		Sales:          application.NewSaleDashboard(mv, stallAudit{gate, opt.stall}, ledger, queue, counter, roomDir, clock),
		Split:          opt.split,
		PublicReadTTL:  opt.readTTL,
		Cancel:         application.NewCancelOrder(orders, ledger, stock),
		Pay:            application.NewPayOrder(orders, vouchers, ledger, gate, clock, payWindow),
		PaymentSecret:  []byte(paySecret),
		Orders:         application.NewListSaleOrders(vouchers, spySaleOrders{ledger, c}),
		Audit:          application.NewReadAuditLog(spyAudit{memory.NewAuditLog(mv), c}),
		Controls:       application.NewControlSale(mv, gate, clock),
		Rooms:          room,
	}
	if opt.noRooms {
		d.Rooms = nil
	}
	d.ClaimObserver, d.Bearer = opt.observer, opt.bearer
	if opt.noPayments {
		d.PaymentSecret = nil
	}
	if !opt.createdAt.IsZero() {
		d.Clock = testenv.NewClock(opt.createdAt)
	}
	if opt.admins != nil {
		d.Admins = opt.admins
	}
	if opt.noAdmins {
		d.Admins = nil
	}
	if opt.noTokens {
		d.Tokens = nil
	}
	if opt.sessions != nil {
		// Tokens minted in the memory store (the admin's) still resolve;
		// every other token goes to the test's store.
		d.Sessions = sessionsFunc(func(ctx context.Context, token string) (domain.UserID, error) {
			if u, err := sessions.UserID(ctx, token); err == nil {
				return u, nil
			}
			return opt.sessions.UserID(ctx, token)
		})
	}
	lookups := &atomic.Int64{}
	resolve := d.Sessions
	d.Sessions = sessionsFunc(func(ctx context.Context, token string) (domain.UserID, error) {
		lookups.Add(1)
		return resolve.UserID(ctx, token)
	})
	return &env{
		t: t, h: httpapi.NewRouter(d), calls: c, vouchers: vouchers, stored: mv, orders: orders,
		gate: gate, queue: queue, fulfill: application.NewFulfillOrders(orders, gate), logs: logs,
		sessions: sessions, lookups: lookups, ledger: ledger, clock: clock, counter: counter, rooms: rooms,
	}
}

// result is the envelope as a client reads it; data stays raw so each test
// decodes what it expects.
type result struct {
	status     int
	raw        string
	requestID  string          // X-Request-Id of the answer
	retryAfter string          // Retry-After of the answer
	Success    bool            `json:"success"`
	ErrorMsg   string          `json:"errorMsg"`
	Data       json.RawMessage `json:"data"`
	Code       string          `json:"code"`
}

type req struct {
	method, path, token, body string
	header                    map[string]string
	reader                    io.Reader // overrides body, for bodies of unknown length
	remote                    string    // the peer's host:port; httptest's default otherwise
}

// raw makes one request and checks the exchange against openapi.json.
func (e *env) raw(r req) *httptest.ResponseRecorder {
	e.t.Helper()
	var sent []byte
	var body io.Reader
	switch {
	case r.reader != nil:
		// Read whole so the contract check sees what the server read; the
		// handler still gets a body of unknown length.
		b, err := io.ReadAll(r.reader)
		if err != nil {
			e.t.Fatal(err)
		}
		sent, body = b, unsized{bytes.NewReader(b)}
	case r.body != "":
		sent, body = []byte(r.body), strings.NewReader(r.body)
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.remote != "" {
		hr.RemoteAddr = r.remote
	}
	if r.body != "" || r.reader != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("authorization", r.token)
	}
	for k, v := range r.header {
		if v == "" {
			hr.Header.Del(k)
			continue
		}
		hr.Header.Set(k, v)
	}
	sentHeader := hr.Header.Clone()
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, hr)
	checkContract(e.t, r.method, r.path, sentHeader, sent, w)
	return w
}

// unsized hides a reader's length, as a chunked body has none.
type unsized struct{ io.Reader }

func (e *env) do(r req) result {
	e.t.Helper()
	w := e.raw(r)
	res := decodeResult(e.t, w.Code, w.Header().Get("Content-Type"), w.Body.String())
	res.requestID = w.Header().Get("X-Request-Id")
	res.retryAfter = w.Header().Get("Retry-After")
	return res
}

func decodeResult(t testing.TB, status int, contentType, raw string) result {
	t.Helper()
	if contentType != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json (body %s)", contentType, raw)
	}
	res := result{status: status, raw: raw}
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatalf("answer is not an envelope: %v: %s", err, raw)
	}
	return res
}

// dataString returns the envelope's data, which must be a JSON string.
func (r result) dataString(t testing.TB) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(r.Data, &s); err != nil {
		t.Fatalf("data is not a JSON string: %s", r.raw)
	}
	return s
}

func (e *env) mustOK(r req) result {
	e.t.Helper()
	res := e.do(r)
	if res.status != http.StatusOK || !res.Success {
		e.t.Fatalf("%s %s: got %d %s, want success", r.method, r.path, res.status, res.raw)
	}
	return res
}

// wantRefusal checks an error answer: status, code, and the errorMsg.
func wantRefusal(t *testing.T, res result, status int, code, msg string) {
	t.Helper()
	if res.status != status || res.Success || res.Code != code {
		t.Fatalf("got %d %s, want %d with code %q", res.status, res.raw, status, code)
	}
	if msg != "" && res.ErrorMsg != msg {
		t.Fatalf("errorMsg = %q, want %q", res.ErrorMsg, msg)
	}
	if res.ErrorMsg == "" {
		t.Fatalf("refusal without errorMsg: %s", res.raw)
	}
	if res.Data != nil {
		t.Fatalf("refusal carries data: %s", res.raw)
	}
}

func (e *env) token(user int64) string {
	e.t.Helper()
	return e.mustOK(req{method: "POST", path: "/dev/tokens", body: fmt.Sprintf(`{"userId":%d}`, user)}).dataString(e.t)
}

// adminToken is a login token of adminUser, minted straight in the session
// store so that it works with the dev endpoint off too.
func (e *env) adminToken() string {
	e.t.Helper()
	if e.adminTok == "" {
		tok, err := e.sessions.Mint(context.Background(), adminUser)
		if err != nil {
			e.t.Fatal(err)
		}
		e.adminTok = tok
	}
	return e.adminTok
}

// voucherJSON is a valid creation body whose sale runs from begin to end, in
// the original's zone-less format.
func voucherJSON(shop int64, stock int, begin, end time.Time) string {
	return fmt.Sprintf(`{"shopId":%d,"title":"100元代金券","subTitle":"周一至周五均可使用",`+
		`"rules":"全场通用\\n无需预约","payValue":8000,"actualValue":10000,"type":1,`+
		`"stock":%d,"beginTime":%q,"endTime":%q}`,
		shop, stock, begin.In(zone).Format("2006-01-02T15:04:05"), end.In(zone).Format("2006-01-02T15:04:05"))
}

// addVoucher creates a seckill voucher on sale around now and returns its id.
func (e *env) addVoucher(shop int64, stock int) string {
	e.t.Helper()
	return e.addVoucherWindow(shop, stock, now.Add(-time.Hour), now.Add(time.Hour))
}

func (e *env) addVoucherWindow(shop int64, stock int, begin, end time.Time) string {
	e.t.Helper()
	id := e.mustOK(req{method: "POST", path: "/voucher/seckill", token: e.adminToken(), body: voucherJSON(shop, stock, begin, end)}).dataString(e.t)
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
		e.t.Fatalf("voucher id %q is not a positive integer string", id)
	}
	return id
}

func (e *env) claim(voucher, token string) result {
	e.t.Helper()
	return e.do(req{method: "POST", path: "/voucher-order/seckill/" + voucher, token: token})
}

// gateStock is what the gate has left to sell.
func (e *env) gateStock(voucher string) int {
	e.t.Helper()
	id, _ := strconv.ParseInt(voucher, 10, 64)
	n, ok, err := e.gate.Stock(context.Background(), domain.VoucherID(id))
	if err != nil || !ok {
		e.t.Fatalf("gate stock of voucher %s: ok=%v err=%v", voucher, ok, err)
	}
	return n
}

// drain takes what the queue holds, as the worker would, without waiting:
// Receive returns at once when an order is queued, and the test knows one is.
func (e *env) drain(want int) []ports.Delivery {
	e.t.Helper()
	if e.queue.Len() != want {
		e.t.Fatalf("queue holds %d orders, want %d", e.queue.Len(), want)
	}
	if want == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := e.queue.Receive(ctx, want)
	if err != nil || len(ds) != want {
		e.t.Fatalf("receive: got %d orders, err %v; want %d", len(ds), err, want)
	}
	return ds
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
