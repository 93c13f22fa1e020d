package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
)

// tokenTTL outlives any run; cleanup deletes the tokens anyway.
const tokenTTL = 30 * time.Minute

// mintPipeline is how many sessions one round trip writes.
const mintPipeline = 1000

// benchProxy is the reverse proxy the service trusts in the bench: the load
// comes from loopback and names each user's own address (userAddr) in
// X-Real-IP.
const benchProxy = "127.0.0.1/32"

// userAddr is user i's client address: 10.0.0.1 onwards, one per user.
func userAddr(i int) string {
	n := i + 1
	return fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
}

// workload is who claims and in which order.
type workload struct {
	users  []domain.UserID
	tokens []string
	// headers are built once per user and only read: vegeta copies them
	// into each request.
	headers []http.Header
	// seq is the user index of each request, in the order they are sent.
	seq []int32
}

// newWorkload gives users 1..n each between 1 and maxPer requests (exactly
// maxPer when it is 1), shuffled with a fixed seed so every mode replays the
// same sale.
func newWorkload(n, maxPer int, seed int64) *workload {
	w := &workload{users: make([]domain.UserID, n)}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5ec4111))
	for i := range w.users {
		w.users[i] = domain.UserID(i + 1)
		k := 1
		if maxPer > 1 {
			k = 1 + rng.IntN(maxPer)
		}
		for range k {
			w.seq = append(w.seq, int32(i))
		}
	}
	rng.Shuffle(len(w.seq), func(i, j int) { w.seq[i], w.seq[j] = w.seq[j], w.seq[i] })
	return w
}

// mint writes a session for every user the way the original's login does
// (the hash login:token:<token> with id, nickName, icon, and a TTL),
// pipelined: minting 20,000 users one round trip at a time would take longer
// than the sale.
func (w *workload) mint(ctx context.Context, rdb *redis.Client) error {
	w.tokens = make([]string, len(w.users))
	w.headers = make([]http.Header, len(w.users))
	for start := 0; start < len(w.users); start += mintPipeline {
		end := min(start+mintPipeline, len(w.users))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < end; i++ {
				tok := redissession.NewToken()
				key := redissession.DefaultPrefix + tok
				u := int64(w.users[i])
				p.HSet(ctx, key, "id", u, "nickName", fmt.Sprintf("user_%d", u), "icon", "")
				p.Expire(ctx, key, tokenTTL)
				w.tokens[i] = tok
				w.headers[i] = http.Header{"Authorization": {tok}, "X-Real-Ip": {userAddr(i)}}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("mint tokens: %w", err)
		}
	}
	return nil
}

func deleteTokens(ctx context.Context, rdb *redis.Client, tokens []string) error {
	for start := 0; start < len(tokens); start += mintPipeline {
		end := min(start+mintPipeline, len(tokens))
		keys := make([]string, 0, end-start)
		for _, t := range tokens[start:end] {
			keys = append(keys, redissession.DefaultPrefix+t)
		}
		if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// targeter hands out the workload's requests in order, each with its user's
// token. The user's index rides in the query string, which every handler
// ignores, so a result can be traced back to its user: vegeta's sequence
// numbers are taken before the targeter runs and may not match its order.
func (w *workload) targeter(base string, voucher domain.VoucherID) vegeta.Targeter {
	urls := make([]string, len(w.users))
	for i := range w.users {
		urls[i] = fmt.Sprintf("%s/voucher-order/seckill/%d?u=%d", base, voucher, i)
	}
	var next atomic.Int64
	return func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		if i >= int64(len(w.seq)) {
			return vegeta.ErrNoTargets
		}
		u := w.seq[i]
		t.Method = http.MethodPost
		t.URL = urls[u]
		t.Header = w.headers[u]
		t.Body = nil
		return nil
	}
}

// userOf reads back the user index the targeter put in the URL.
func userOf(url string) (int, bool) {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '=' {
			n, err := strconv.Atoi(url[i+1:])
			return n, err == nil
		}
	}
	return 0, false
}
