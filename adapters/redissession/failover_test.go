package redissession_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
	"github.com/hmdp-go/seckill/test/testenv"
)

// Failures of the subscribers and changes of a cluster's masters.

// TestSessionsFollowsTheClustersMasters: the watch lists the masters on each
// tick. A master it did not know (here: hidden from the first listings, as
// one that joins by a failover or a new node would be) gets a subscriber,
// and the cache serves nothing it may have missed a report for; a master
// that cannot be listed stops the cache from serving; a master that leaves
// is dropped without holding the cache back.
func TestSessionsFollowsTheClustersMasters(t *testing.T) {
	ctx := context.Background()
	cc := testenv.RedisCluster(t)
	all, err := redissession.ClusterMasters(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 3 {
		t.Fatalf("the cluster has %d masters, the test needs 3", len(all))
	}
	prefix := testenv.TokenPrefix(t)
	store := redissession.New(cc, redissession.Options{Prefix: prefix})
	mintOn := func(addr string, user domain.UserID) string {
		t.Helper()
		return mintOnMaster(t, cc, store, prefix, addr, user)
	}
	joining := all[2].Addr

	type listing struct {
		masters []redissession.Master
		err     error
	}
	var listed atomic.Pointer[listing]
	// Before the joining master is listed, its slots are listed under the
	// first master, as they were before a failover the watch has not seen:
	// writes to them are not reported to this instance.
	unseen := redissession.Master{Addr: all[0].Addr, Slots: append(append([][2]int{}, all[0].Slots...), all[2].Slots...)}
	listed.Store(&listing{masters: []redissession.Master{unseen, all[1]}})
	tick := make(chan time.Time)
	poll := func(in instance, want listing) {
		t.Helper()
		listed.Store(&want)
		before := in.sessions.Polls()
		tick <- time.Now()
		testenv.Eventually(t, 2*time.Second, func() (bool, string) {
			return in.sessions.Polls() > before, "the watch did not list the masters"
		})
	}
	opts := redissession.WithTopology(redissession.CacheOptions{NoPrefetch: true}, func(context.Context) ([]redissession.Master, error) {
		l := listed.Load()
		return l.masters, l.err
	}, tick)
	in := newInstance(t, func(testing.TB) redis.UniversalClient { return cc }, prefix, opts)
	resolves := func(tok string, want domain.UserID) {
		t.Helper()
		if u, err := in.sessions.UserID(ctx, tok); err != nil || u != want {
			t.Fatalf("lookup: %d, %v; want %d", u, err, want)
		}
	}
	costs := func(tok string) int64 {
		t.Helper()
		before := in.sent.all.Load()
		_, _ = in.sessions.UserID(ctx, tok)
		return in.sent.all.Load() - before
	}

	// A session on the unknown master is cached, and its revocation goes
	// unheard: the gap the watch closes.
	// (Other logins' reports may keep a lookup from caching: retry.)
	hidden := mintOn(joining, 1)
	testenv.Eventually(t, 2*time.Second, func() (bool, string) {
		resolves(hidden, 1)
		return costs(hidden) == 0, "a lookup is not cached"
	})
	if err := cc.Del(ctx, prefix+hidden).Err(); err != nil {
		t.Fatal(err)
	}
	resolves(hidden, 1)

	// The next listing names it: from the end of that poll on, the token
	// is refused (its slot is not served until the new subscriber listens,
	// and what was cached of it before is stale).
	poll(in, listing{masters: all})
	if _, err := in.sessions.UserID(ctx, hidden); !errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("a token revoked on a master that joined, after the watch saw it: %v, want ErrUnknownToken", err)
	}
	// Once the subscriber listens, that master's revocations are heard.
	heard := mintOn(joining, 2)
	testenv.Eventually(t, 2*time.Second, func() (bool, string) {
		resolves(heard, 2)
		return costs(heard) == 0, "the cache does not serve after the new master's subscriber started"
	})
	if err := cc.Del(ctx, prefix+heard).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Second, func() (bool, string) {
		_, err := in.sessions.UserID(ctx, heard)
		return errors.Is(err, ports.ErrUnknownToken), fmt.Sprintf("a revoked token on the joined master still resolves (%v)", err)
	})

	// Masters that cannot be listed: every request asks Redis.
	// (The login's own report may evict the first lookup's answer.)
	kept := mintOn(all[0].Addr, 3)
	testenv.Eventually(t, 2*time.Second, func() (bool, string) {
		resolves(kept, 3)
		return costs(kept) == 0, "a lookup is not cached"
	})
	poll(in, listing{err: errors.New("CLUSTER SLOTS failed")})
	if n := costs(kept); n == 0 {
		t.Fatal("the cache served while the masters could not be listed")
	}
	// Listed again, without a master that left: the cache serves again.
	poll(in, listing{masters: []redissession.Master{all[0], all[2]}})
	testenv.Eventually(t, 2*time.Second, func() (bool, string) {
		resolves(kept, 3)
		return costs(kept) == 0, "the cache does not serve after the masters were listed again"
	})
}

// TestSessionsServesNothingWhileASubscriberIsDown: when the subscriber's
// connection dies, reports can be missed, so every request asks Redis until
// it listens again, and what was cached before is gone: a token revoked
// while it was down (unreported) is refused afterwards.
func TestSessionsServesNothingWhileASubscriberIsDown(t *testing.T) {
	ctx := context.Background()
	setup := testenv.RealRedis(t)
	prefix := testenv.TokenPrefix(t)
	store := redissession.New(setup, redissession.Options{Prefix: prefix})
	kept, err := store.Mint(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := store.Mint(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[instance]
	opts, during := whileDown(redissession.CacheOptions{NoPrefetch: true}, func() error {
		in := current.Load()
		// A token is looked up in Redis on every request, not cached and
		// served.
		for i := 0; i < 2; i++ {
			if n, err := lookupCost(*in, kept, 1); err != nil || n == 0 {
				return fmt.Errorf("request %d while the subscriber was down: %d commands, %v; want a lookup", i+1, n, err)
			}
		}
		return nil
	})
	in := newInstance(t, func(tb testing.TB) redis.UniversalClient { return testenv.RealRedis(tb) }, prefix, opts)
	current.Store(&in)
	for i, tok := range []string{kept, revoked} {
		testenv.Eventually(t, 2*time.Second, func() (bool, string) {
			if u, err := in.sessions.UserID(ctx, tok); err != nil || u != domain.UserID(i+1) {
				return false, fmt.Sprintf("lookup: %d, %v", u, err)
			}
			before := in.sent.all.Load()
			_, _ = in.sessions.UserID(ctx, tok)
			return in.sent.all.Load() == before, "a lookup is not cached"
		})
	}

	ids := in.sessions.SubscriberIDs()
	if len(ids) != 1 || ids[0] == 0 {
		t.Fatalf("subscriber ids %v, want one", ids)
	}
	killRevoking(t, setup, ids[0], prefix+revoked, during)

	// Listening again: served from memory once more, without the token
	// revoked in between.
	testenv.Eventually(t, 5*time.Second, func() (bool, string) {
		_, _ = in.sessions.UserID(ctx, kept)
		before := in.sent.all.Load()
		_, _ = in.sessions.UserID(ctx, kept)
		return in.sent.all.Load() == before, "the cache does not serve after the subscriber reconnected"
	})
	if _, err := in.sessions.UserID(ctx, revoked); !errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("a token revoked while the subscriber was down: %v, want ErrUnknownToken", err)
	}
}

// TestSessionsWatchIsNotStalledByAMasterThatDoesNotAnswer: a listed master
// that accepts connections but never answers (a node still starting, a
// half-dead host) gets a subscriber that counts as down, so the tokens of
// the slots it took are looked up in Redis while the other masters' are
// still served from memory, and the watch goes on listing instead of
// waiting on its handshake.
func TestSessionsWatchIsNotStalledByAMasterThatDoesNotAnswer(t *testing.T) {
	ctx := context.Background()
	cc := testenv.RedisCluster(t)
	all, err := redissession.ClusterMasters(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	// The client's handshake waits out its read timeout (3 s).
	mute := muteListener(t)

	prefix := testenv.TokenPrefix(t)
	var listed atomic.Pointer[[]redissession.Master]
	listed.Store(&all)
	tick := make(chan time.Time)
	opts := redissession.WithTopology(redissession.CacheOptions{NoPrefetch: true}, func(context.Context) ([]redissession.Master, error) {
		return *listed.Load(), nil
	}, tick)
	// Logged in before the instance listens: the reports of these writes
	// would reach it late on a busy machine and evict what it cached.
	store := redissession.New(cc, redissession.Options{Prefix: prefix})
	token := mintOnMaster(t, cc, store, prefix, all[0].Addr, 5)
	other := mintOnMaster(t, cc, store, prefix, all[1].Addr, 6)
	in := newInstance(t, func(testing.TB) redis.UniversalClient { return cc }, prefix, opts)
	for _, tok := range []string{token, other} {
		testenv.Eventually(t, 2*time.Second, func() (bool, string) {
			_, _ = in.sessions.UserID(ctx, tok)
			before := in.sent.all.Load()
			_, _ = in.sessions.UserID(ctx, tok)
			return in.sent.all.Load() == before, "a lookup is not cached"
		})
	}

	poll := func(ms []redissession.Master) {
		t.Helper()
		listed.Store(&ms)
		before := in.sessions.Polls()
		select {
		case tick <- time.Now():
		case <-time.After(time.Second):
			t.Fatal("the watch did not take the next tick: it is stalled")
		}
		testenv.Eventually(t, time.Second, func() (bool, string) {
			return in.sessions.Polls() > before, "the watch did not finish listing the masters: it is stalled"
		})
	}
	// The mute node takes the first master's slots (a failover to it).
	failedOver := append([]redissession.Master{{Addr: all[0].Addr}}, all[1:]...)
	poll(append(failedOver, redissession.Master{Addr: mute.Addr().String(), Slots: all[0].Slots}))
	before := in.sent.all.Load()
	if _, err := in.sessions.UserID(ctx, token); err != nil {
		t.Fatal(err)
	}
	if in.sent.all.Load() == before {
		t.Fatal("the cache served a token whose slot a master that does not listen took")
	}
	requireFreeLookups(t, in, other, 6, "a token on a master that kept its slots")
	// The next listing goes on at once, and drops the mute node.
	poll(all)
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		_, _ = in.sessions.UserID(ctx, token)
		before := in.sent.all.Load()
		_, _ = in.sessions.UserID(ctx, token)
		return in.sent.all.Load() == before, "the cache does not serve after the mute node left the listing"
	})
}

// mintOnMaster logs user in with a token whose key lives on the master at
// addr.
func mintOnMaster(t *testing.T, cc *redis.ClusterClient, store *redissession.Store, prefix, addr string, user domain.UserID) string {
	t.Helper()
	ctx := context.Background()
	for {
		tok, err := store.Mint(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cc.MasterForKey(ctx, prefix+tok)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == addr {
			return tok
		}
		if err := cc.Del(ctx, prefix+tok).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSlotOfMatchesClusterKeyslot: the cache finds a token's master by its
// slot, which must be the one Redis computes (CRC16-XMODEM of the key, or
// of its first non-empty hash tag, mod 16384).
func TestSlotOfMatchesClusterKeyslot(t *testing.T) {
	ctx := context.Background()
	cc := testenv.RedisCluster(t)
	keys := []string{
		"", "a", "login:token:", "{}", "{}x", "x{}", "{a}", "x{a}y", "{a}{b}", "{}{a}", "a}{b}", "{{a}}", "}{", "{a", "a}",
		redissession.DefaultPrefix + "{user1000}.following", "\xff\x00{\xfe}",
	}
	for i := 0; i < 200; i++ {
		keys = append(keys, redissession.DefaultPrefix+redissession.NewToken())
	}
	for _, k := range keys {
		want, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redissession.SlotOf(k); int64(got) != want {
			t.Errorf("SlotOf(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// whileDown sets a hook that runs check once, on a subscriber's first
// failure, in its listener before it redials: the subscriber stays down
// until check returns. Check's verdict comes on the channel.
func whileDown(opts redissession.CacheOptions, check func() error) (redissession.CacheOptions, <-chan error) {
	var downs atomic.Int64
	verdict := make(chan error, 1)
	return redissession.WithAfterDown(opts, func() {
		if downs.Add(1) == 1 {
			verdict <- check()
		}
	}), verdict
}

// killRevoking kills the subscriber connection id on node and deletes key
// in one step, so that no subscriber hears the deletion (go-redis redials at
// once once it notices, so a DEL sent after the kill could be heard by the
// new connection), then waits for the verdict of the check whileDown ran.
func killRevoking(t *testing.T, node redis.Cmdable, id int64, key string, verdict <-chan error) {
	t.Helper()
	ctx := context.Background()
	if _, err := node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "client", "kill", "id", id)
		p.Del(ctx, key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-verdict:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the subscriber did not notice its connection was killed")
	}
}

// lookupCost looks token up on in and tells how many commands that sent,
// or an error if it did not resolve to want.
func lookupCost(in instance, token string, want domain.UserID) (int64, error) {
	before := in.sent.all.Load()
	if u, err := in.sessions.UserID(context.Background(), token); err != nil || u != want {
		return 0, fmt.Errorf("lookup: %d, %v; want %d", u, err, want)
	}
	return in.sent.all.Load() - before, nil
}

// TestSessionsServesOtherMastersWhileOneSubscriberIsDown: a failure stays
// where it happened. While the subscriber of one master is down, the tokens
// on the other masters are still served from memory (no Redis at all), and
// only those on that master are looked up in Redis; a token revoked on it
// meanwhile (unreported) is refused once it listens again, and, the cache
// warming, its other sessions are read back into memory by then.
func TestSessionsServesOtherMastersWhileOneSubscriberIsDown(t *testing.T) {
	ctx := context.Background()
	cc := testenv.RedisCluster(t)
	all, err := redissession.ClusterMasters(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Fatalf("the cluster has %d masters, the test needs 2", len(all))
	}
	prefix := testenv.TokenPrefix(t)
	store := redissession.New(cc, redissession.Options{Prefix: prefix})
	// Logged in before the instance listens: no report races the lookups.
	healthy := mintOnMaster(t, cc, store, prefix, all[0].Addr, 1)
	affected := mintOnMaster(t, cc, store, prefix, all[1].Addr, 2)
	revoked := mintOnMaster(t, cc, store, prefix, all[1].Addr, 3)

	var current atomic.Pointer[instance]
	opts, during := whileDown(redissession.CacheOptions{NoPrefetch: true}, func() error {
		in := current.Load()
		for i := 0; i < 100; i++ {
			if n, err := lookupCost(*in, healthy, 1); err != nil || n != 0 {
				return fmt.Errorf("request %d of a token on a healthy master: %d commands, %v; want 0 (served from memory)", i+1, n, err)
			}
		}
		for i := 0; i < 2; i++ {
			if n, err := lookupCost(*in, affected, 2); err != nil || n == 0 {
				return fmt.Errorf("request %d of a token on the master whose subscriber is down: %d commands, %v; want a lookup", i+1, n, err)
			}
		}
		return nil
	})
	in := newInstance(t, func(testing.TB) redis.UniversalClient { return cc }, prefix, opts)
	current.Store(&in)
	in.sessions.Warm()
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		p := in.sessions.WarmProgress()
		return p.Done, fmt.Sprintf("warm-up: %+v", p)
	})
	for _, tok := range []string{healthy, affected, revoked} {
		if !in.sessions.Holds(tok) {
			t.Fatalf("token %s, logged in before the start, was not warmed", tok)
		}
	}

	id := in.sessions.SubscriberID(all[1].Addr)
	if id == 0 {
		t.Fatalf("no subscriber for %s", all[1].Addr)
	}
	node, err := cc.MasterForKey(ctx, prefix+revoked)
	if err != nil {
		t.Fatal(err)
	}
	killRevoking(t, node, id, prefix+revoked, during)

	// Listening again: the master's sessions are read back (the warm-up
	// reads a master again when its subscriber comes back), without the
	// one revoked in between.
	testenv.Eventually(t, 10*time.Second, func() (bool, string) {
		return in.sessions.Holds(affected), "the affected master's sessions are not read back after its subscriber came back"
	})
	if n, err := lookupCost(in, affected, 2); err != nil || n != 0 {
		t.Fatalf("a token on the master whose subscriber came back: %d commands, %v; want 0", n, err)
	}
	if in.sessions.Holds(revoked) {
		t.Fatal("a token revoked while its master's subscriber was down is held")
	}
	if _, err := in.sessions.UserID(ctx, revoked); !errors.Is(err, ports.ErrUnknownToken) {
		t.Fatalf("a token revoked while its master's subscriber was down: %v, want ErrUnknownToken", err)
	}
	requireFreeLookups(t, in, healthy, 1, "a token on a healthy master")
}
