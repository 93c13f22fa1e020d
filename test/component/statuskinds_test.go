package component_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/uptrace/bun"

	"github.com/hmdp-go/seckill/adapters/httpapi"
	"github.com/hmdp-go/seckill/adapters/mysqlstore"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
)

// backendLog records, for requests that carry a request id, the kind of
// every SQL statement (its text with numbers blanked) and every Redis
// command (its name), in order.
type backendLog struct {
	mu  sync.Mutex
	sql []string
	cmd []string
}

var digits = regexp.MustCompile(`[0-9]+`)

func (b *backendLog) reset() (sql, cmd []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sql, cmd, b.sql, b.cmd = b.sql, b.cmd, nil, nil
	return sql, cmd
}

func (b *backendLog) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	if httpapi.RequestID(ctx) != "" {
		b.mu.Lock()
		b.sql = append(b.sql, strings.Join(strings.Fields(digits.ReplaceAllString(e.Query, "N")), " "))
		b.mu.Unlock()
	}
	return ctx
}

func (b *backendLog) AfterQuery(context.Context, *bun.QueryEvent) {}

func (b *backendLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *backendLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if httpapi.RequestID(ctx) != "" {
			b.mu.Lock()
			b.cmd = append(b.cmd, cmd.Name())
			b.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (b *backendLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if httpapi.RequestID(ctx) != "" {
			b.mu.Lock()
			for _, c := range cmds {
				b.cmd = append(b.cmd, c.Name())
			}
			b.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// TestOrderStatusOfAnotherUserCostsWhatAnUnknownIDCosts: the timing oracle of
// issue 24. For an order queued, created and failed, another user's lookup
// and a lookup of an id that never existed send the same SQL statements and
// the same Redis commands, in the same order (one statement, one GET), so
// neither the answer (404) nor the work behind it tells which ids exist. The
// owner's lookups are checked to answer, so the orders really are in those
// states.
func TestOrderStatusOfAnotherUserCostsWhatAnUnknownIDCosts(t *testing.T) {
	for _, queue := range []string{infra.QueueChannel, infra.QueueStream} {
		t.Run(queue, func(t *testing.T) {
			cfg := embeddedConfig(t, queue)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg.Workers = 0 // the test moves orders to their states itself
			app := run(t, cfg, zerolog.Nop())
			base := "http://" + app.Addr()
			ctx := context.Background()
			owner, other := login(t, app, 1), login(t, app, 2)

			// One claimed order per state, each on its own voucher.
			claimed := map[domain.OrderState]domain.VoucherOrder{}
			for _, state := range []domain.OrderState{domain.OrderQueued, domain.OrderCreated, domain.OrderFailed} {
				vid := createVoucher(t, app, 5)
				env := claim(t, app, vid, owner)
				var id string
				if err := json.Unmarshal(env.Data, &id); !env.Success || err != nil {
					t.Fatalf("claim: %+v", env)
				}
				var oid int64
				fmt.Sscan(id, &oid)
				o, err := domain.NewVoucherOrder(domain.OrderID(oid), 1, vid)
				if err != nil {
					t.Fatal(err)
				}
				claimed[state] = o
			}
			repo := mysqlstore.NewOrderRepo(app.DB)
			if _, err := repo.CreateBatch(ctx, []domain.VoucherOrder{claimed[domain.OrderCreated]}); err != nil {
				t.Fatal(err)
			}
			if _, err := repo.MarkFailed(ctx, []domain.VoucherOrder{claimed[domain.OrderFailed]}, domain.FailureReason("out_of_stock")); err != nil {
				t.Fatal(err)
			}

			log := &backendLog{}
			app.Redis.AddHook(log)
			app.DB.AddQueryHook(log)
			type cost struct{ sql, cmd []string }
			lookup := func(token string, id domain.OrderID) (int, string, cost) {
				log.reset()
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/voucher-order/%d", base, id), nil)
				req.Header.Set("authorization", token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var env envelope
				_ = json.NewDecoder(resp.Body).Decode(&env)
				resp.Body.Close()
				var got struct{ State string }
				_ = json.Unmarshal(env.Data, &got)
				sql, cmd := log.reset()
				return resp.StatusCode, got.State, cost{sql, cmd}
			}
			// Tokens are cached after their first use; warm both.
			lookup(owner, 1)
			lookup(other, 1)

			_, _, unknown := lookup(other, 1234567890123)
			t.Logf("unknown id: SQL %q, Redis %v", unknown.sql, unknown.cmd)
			if len(unknown.sql) != 1 || !slices.Equal(unknown.cmd, []string{"get"}) {
				t.Fatalf("an unknown id cost SQL %q and Redis %v: want one statement and one GET", unknown.sql, unknown.cmd)
			}
			for state, o := range claimed {
				t.Run(string(state), func(t *testing.T) {
					code, got, own := lookup(owner, o.ID())
					if code != http.StatusOK || got != string(state) {
						t.Fatalf("the owner's lookup: HTTP %d state %q, want 200 %q", code, got, state)
					}
					code, _, others := lookup(other, o.ID())
					if code != http.StatusNotFound {
						t.Fatalf("another user's lookup: HTTP %d, want 404", code)
					}
					t.Logf("own: SQL %d Redis %v; another user's: SQL %d Redis %v", len(own.sql), own.cmd, len(others.sql), others.cmd)
					if !slices.Equal(others.sql, unknown.sql) || !slices.Equal(others.cmd, unknown.cmd) {
						t.Fatalf("another user's %s order cost SQL %q and Redis %v; an unknown id SQL %q and Redis %v: want the same",
							state, others.sql, others.cmd, unknown.sql, unknown.cmd)
					}
				})
			}
		})
	}
}
