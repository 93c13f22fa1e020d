// Package testapp runs the wired service inside a test, as `seckill serve`
// would, for the tests that drive it whole (component, browser, infra).
package testapp

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
	"github.com/hmdp-go/seckill/test/testenv"
)

// Start builds and starts the service c describes, and shuts it down when
// the test ends; a failed shutdown fails the test. Validating c is left to
// the caller, who may need a state Validate refuses (no workers).
func Start(t testing.TB, c infra.Config, log zerolog.Logger) *infra.App {
	t.Helper()
	app, cleanup, err := infra.Build(c, log)
	if err != nil {
		t.Fatal(err)
	}
	// Tokens minted through the service's client (by the test or the
	// service) are deleted from a shared Redis when the test ends.
	testenv.ForgetTokens(t, app.Redis)
	if err := app.Start(context.Background()); err != nil {
		cleanup()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		cleanup()
	})
	return app
}
