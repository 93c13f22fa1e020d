// Package browser drives the service's pages in headless Chromium (chromedp),
// as a person would use them: the live sale page loads, shows a sale, and
// its numbers move while claims come in.
package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// screenshotEnv names a file to save the phone-sized screenshot to (the
// README's docs/live-sale.png is made with it); unset, none is written.
const screenshotEnv = "SECKILL_SALE_SCREENSHOT"

const admin domain.UserID = 1

// chromium finds the browser: required under CI, skipped with a word otherwise.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.CI() {
		t.Fatal("headless Chromium is required under CI=true: apt-get install -y chromium")
	}
	t.Skip("skipping the browser test: no chromium on PATH (apt-get install -y chromium; required under CI=true)")
	return ""
}

// startService runs the wired service on the embedded backends with the
// Stream queue (whose backlog the page shows per sale), and user 1 as admin.
func startService(t *testing.T) (string, *infra.App) {
	t.Helper()
	c := infra.DefaultConfig()
	c.HTTPAddr = "127.0.0.1:0"
	c.DataDir = t.TempDir()
	c.Queue = infra.QueueStream
	c.AdminUsers = fmt.Sprint(admin)
	c.DevEndpoints = true
	c.RateIP, c.RateUser = 0, 0
	c.MetricsAddr = "127.0.0.1:0" // the default port would collide with parallel runs
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	app, cleanup, err := infra.Build(c, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	})
	return "http://" + app.Addr(), app
}

func post(t *testing.T, url, token, body string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("authorization", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct {
		Success bool   `json:"success"`
		Data    string `json:"data"`
		Code    string `json:"code"`
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	if !env.Success && env.Code != "sold_out" {
		t.Fatalf("POST %s: %d %+v", url, res.StatusCode, env)
	}
	return env.Data
}

// TestLiveSalePageShowsASaleAndItsNumbersMove: an admin opens the page on a
// phone-sized screen, logs in with a token, sees the sale, and watches the
// claims, stock and orders move while waves of users claim.
func TestLiveSalePageShowsASaleAndItsNumbersMove(t *testing.T) {
	browserPath := chromium(t)
	base, app := startService(t)
	ctx := context.Background()
	adminToken, err := app.Tokens.Mint(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	const stock, waves, perWave = 40, 4, 15 // 60 users for 40 units: the last waves sell out
	now := time.Now()
	voucher := post(t, base+"/voucher/seckill", adminToken, fmt.Sprintf(
		`{"shopId":1,"title":"Weekend flash sale: ¥100 voucher","payValue":8000,"actualValue":10000,"type":1,`+
			`"stock":%d,"beginTime":%q,"endTime":%q}`,
		stock, now.Add(-time.Minute).Format(time.RFC3339), now.Add(2*time.Hour).Format(time.RFC3339)))

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // the test may run as root, where the sandbox cannot start
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(390, 844),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	bctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	// The first run starts the browser; a broken install fails here, clearly.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", browserPath, err)
	}

	card := fmt.Sprintf(`[data-voucher="%s"]`, voucher)
	fieldJS := func(name string) string {
		return fmt.Sprintf(`(document.querySelector('%s [data-field="%s"]') || {}).textContent`, card, name)
	}
	// waitFor polls the page (no sleeps) until cond holds, or fails saying
	// what the page showed.
	waitFor := func(what, cond string) {
		t.Helper()
		pctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Run(pctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			shown, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector('main') || document.body).innerText`))
			t.Fatalf("the page never showed %s: %v\npage:\n%s", what, err, shown)
		}
	}

	lctx, cancelLogin := context.WithTimeout(bctx, 30*time.Second)
	defer cancelLogin()
	err = chromedp.Do(lctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(base+"/admin/sales"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(card)),
	)
	if err != nil {
		shown, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : "(no body)"`))
		t.Fatalf("open the page and log in: %v\npage:\n%s", err, shown)
	}
	waitFor("the sale before any claim",
		fmt.Sprintf(`%s === "0" && %s === "%d"`, fieldJS("claims"), fieldJS("gateStock"), stock))

	// Waves of users claim; each wave waits until the page shows it, so
	// the chart gets a point per wave.
	for w := 0; w < waves; w++ {
		var wg sync.WaitGroup
		for i := 0; i < perWave; i++ {
			user := domain.UserID(1000 + w*perWave + i)
			tok, err := app.Tokens.Mint(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				post(t, base+"/voucher-order/seckill/"+voucher, tok, "")
			}()
		}
		wg.Wait()
		waitFor(fmt.Sprintf("wave %d's claims", w+1), fmt.Sprintf(`%s === "%d"`, fieldJS("claims"), (w+1)*perWave))
	}
	waitFor("the sale sold out in Redis and written to MySQL",
		fmt.Sprintf(`%s === "0" && %s === "%d" && %s === "0"`, fieldJS("gateStock"), fieldJS("orders"), stock, fieldJS("dbStock")))
	soldOut, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(card+` tr[data-outcome="sold_out"] td:nth-child(2)`)))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(waves*perWave - stock); soldOut != want {
		t.Fatalf("the page shows %q sold-out answers, want %s", soldOut, want)
	}

	if path := os.Getenv(screenshotEnv); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("the screenshot is not a PNG")
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot written to %s", path)
	}
}
