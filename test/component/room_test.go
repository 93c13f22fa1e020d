package component_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/adapters/redissession"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

type roomAnswer struct {
	Ticket string `json:"ticket"`
	State  string `json:"state"`
	Pass   string `json:"pass"`
}

func sendRoom(t *testing.T, method, url, token string, header map[string]string) (int, envelope) {
	t.Helper()
	req, err := http.NewRequest(method, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("authorization", token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, env
}

// TestWaitingRoomThroughTheService: the wired service, on the embedded
// Redis, with a voucher created over HTTP with a waiting room: joining,
// polling, a claim without a pass refused at no Redis cost, and the claim
// with the pass taken once the room admits the user at the begin.
func TestWaitingRoomThroughTheService(t *testing.T) {
	app := run(t, embeddedConfig(t, infra.QueueStream), zerolog.Nop())
	sessions := redissession.New(app.Redis, redissession.Options{TTL: time.Hour})
	admin, err := sessions.Mint(context.Background(), adminUID)
	if err != nil {
		t.Fatal(err)
	}
	user, err := sessions.Mint(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now().UTC().Add(3500 * time.Millisecond)
	status, env := postJSON(t, http.DefaultClient, "http://"+app.Addr()+"/voucher/seckill", admin, map[string]any{
		"shopId": 1, "title": "room", "payValue": 100, "actualValue": 1000, "type": 1, "stock": 3,
		"beginTime": begin.Format(time.RFC3339Nano), "endTime": begin.Add(time.Hour).Format(time.RFC3339),
		"waitingRoom": map[string]any{"opensBeforeSeconds": 60, "admitPerSecond": 10},
	})
	if status != http.StatusOK || !env.Success {
		t.Fatalf("create voucher: %d %+v", status, env)
	}
	var s string
	_ = json.Unmarshal(env.Data, &s)
	vid, _ := strconv.ParseInt(s, 10, 64)
	base := fmt.Sprintf("http://%s/voucher-order/", app.Addr())

	status, env = sendRoom(t, http.MethodPost, fmt.Sprintf("%sroom/%d/join", base, vid), user, nil)
	var joined roomAnswer
	if status != http.StatusOK || !env.Success || json.Unmarshal(env.Data, &joined) != nil || joined.State != "pre_queue" {
		t.Fatalf("join: %d %+v", status, env)
	}

	counter := &requestTraffic{}
	app.Redis.AddHook(counter)
	status, env = sendRoom(t, http.MethodPost, fmt.Sprintf("%sseckill/%d", base, vid), user, nil)
	if status != http.StatusOK || env.Code != "pass_required" || env.ErrorMsg == "" {
		t.Fatalf("claim without a pass: %d %+v", status, env)
	}
	if n := counter.n.Load(); n != 0 {
		t.Fatalf("a claim without a pass cost %d Redis round trips; want 0", n)
	}

	var pass string
	deadline := time.Now().Add(15 * time.Second)
	for pass == "" {
		if time.Now().After(deadline) {
			t.Fatal("not admitted 15 s after joining a room whose sale begins 3.5 s after its creation")
		}
		status, env = sendRoom(t, http.MethodGet, fmt.Sprintf("%sroom/%d?ticket=%s", base, vid, joined.Ticket), user, nil)
		var st roomAnswer
		if status != http.StatusOK || !env.Success || json.Unmarshal(env.Data, &st) != nil {
			t.Fatalf("poll: %d %+v", status, env)
		}
		pass = st.Pass
		// A client's poll interval, not synchronisation: under the per-user
		// limit (SECKILL_RATE_USER, 40 per 2 s, which counts the join, the
		// polls and the claims together); at 50 ms a fast machine's polls
		// alone came to 40 per window and the poll was refused 429.
		time.Sleep(100 * time.Millisecond)
	}
	status, env = sendRoom(t, http.MethodPost, fmt.Sprintf("%sseckill/%d", base, vid), user, map[string]string{"X-Room-Pass": pass})
	if status != http.StatusOK || !env.Success {
		t.Fatalf("claim with the pass: %d %+v", status, env)
	}
}

// TestRoomScriptsAreLoadedAtStart: on a Redis that never ran them, the
// service loads the waiting rooms' scripts at start, as the gate's, so a
// sale's room is opened and joined by SHA: Redis answers no NOSCRIPT
// (INFO errorstats) from the voucher's creation to its first join.
func TestRoomScriptsAreLoadedAtStart(t *testing.T) {
	own := testenv.StartRedis(t)
	app, base := startServiceOn(t, infra.QueueChannel, "redis", func(c *infra.Config) { c.RedisURL = own.URL() })
	noScript := func() int {
		info, err := own.Client().Info(context.Background(), "errorstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "errorstat_NOSCRIPT:count="); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	before := noScript()
	body := saleBody(3)
	body["beginTime"] = time.Now().UTC().Add(time.Minute).Format(time.RFC3339) // a room's sale begins ahead
	body["waitingRoom"] = map[string]any{"opensBeforeSeconds": 120, "admitPerSecond": 10}
	status, env := postJSON(t, http.DefaultClient, base+"/voucher/seckill", login(t, app, adminUID), body)
	if status != http.StatusOK || !env.Success {
		t.Fatalf("create voucher: %d %+v", status, env)
	}
	var vid string
	_ = json.Unmarshal(env.Data, &vid)
	status, env = sendRoom(t, http.MethodPost, base+"/voucher-order/room/"+vid+"/join", login(t, app, 7), nil)
	if status != http.StatusOK || !env.Success {
		t.Fatalf("join: %d %+v", status, env)
	}
	if n := noScript() - before; n != 0 {
		t.Fatalf("Redis answered NOSCRIPT %d times while a room was opened and joined after the start", n)
	}
}
