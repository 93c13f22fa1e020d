package infra_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hmdp-go/seckill/infra"
)

// A misspelt variable is otherwise ignored without a word, and the service
// falls back to its default (SECKILL_REDIS_ULR: the embedded Redis).
func TestUnknownVariablesAreNamedWithTheClosestKnownOne(t *testing.T) {
	tests := []struct {
		name    string
		env     string
		unknown string
		closest string
	}{
		{name: "swapped_letters", env: "SECKILL_REDIS_ULR=redis://10.0.0.5:6379/0", unknown: "SECKILL_REDIS_ULR", closest: "SECKILL_REDIS_URL"},
		{name: "missing_letter", env: "SECKILL_MYSQL_DN=root@tcp(db)/x", unknown: "SECKILL_MYSQL_DN", closest: "SECKILL_MYSQL_DSN"},
		{name: "wrong_word", env: "SECKILL_PAYMENT_SECRT=x", unknown: "SECKILL_PAYMENT_SECRT", closest: "SECKILL_PAYMENT_SECRET"},
		{name: "removed", env: "SECKILL_WORKERS=2"},
		{name: "nothing_near", env: "SECKILL_COLOUR=blue", unknown: "SECKILL_COLOUR"},
		{name: "known", env: "SECKILL_REDIS_URL=redis://x"},
		{name: "test_variable", env: "SECKILL_TEST_REDIS_URL=redis://x"},
		{name: "bench_variable", env: "SECKILL_BENCH_WRK_OUT=/tmp/x"},
		{name: "other_program", env: "REDIS_ULR=x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := infra.UnknownVariables([]string{"PATH=/bin", tt.env, "SECKILL_QUEUE=stream"})
			if tt.unknown == "" {
				if len(got) != 0 {
					t.Fatalf("unknown %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Name != tt.unknown || got[0].Closest != tt.closest {
				t.Fatalf("unknown %+v, want [{%s %s}]", got, tt.unknown, tt.closest)
			}
		})
	}
}

func TestUnknownVariablesAreLoggedAsWarnings(t *testing.T) {
	var buf bytes.Buffer
	infra.WarnUnknownVariables(zerolog.New(&buf), []string{"SECKILL_REDIS_ULR=redis://x", "SECKILL_HTTP_ADDR=:1"})
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"level":"warn"`) ||
		!strings.Contains(out, "SECKILL_REDIS_ULR") || !strings.Contains(out, `"did_you_mean":"SECKILL_REDIS_URL"`) {
		t.Fatalf("logged %q, want one warning naming SECKILL_REDIS_ULR and SECKILL_REDIS_URL", out)
	}
}

// Every variable the service reads is known, so a correct environment warns
// about nothing.
func TestEveryConfigVariableIsKnown(t *testing.T) {
	var env []string
	for _, v := range infra.ConfigVariables() {
		env = append(env, v.Name+"=x")
	}
	if got := infra.UnknownVariables(env); len(got) != 0 {
		t.Fatalf("unknown %+v", got)
	}
}

// TestEveryVariableHasHelp: serve --help says what each variable does (it
// listed 52 names and defaults without a meaning). The help is the field's
// help tag, so no line can name a variable the service does not read.
func TestEveryVariableHasHelp(t *testing.T) {
	for _, v := range infra.ConfigVariables() {
		if strings.TrimSpace(v.Help) == "" {
			t.Errorf("%s has no help line (its field's help tag in infra.Config)", v.Name)
		}
	}
}

// TestRemovedVariablesAreWarnedAboutByName: a deployment that still sets a
// variable this release removed starts, and its log says that variable is
// no longer read and what replaced it, rather than calling it unknown.
func TestRemovedVariablesAreWarnedAboutByName(t *testing.T) {
	tests := []struct {
		name, env, instead string
	}{
		{name: "tuning", env: "SECKILL_WORKERS=4", instead: "Tuning.Workers"},
		{name: "never_set_anywhere", env: "SECKILL_STREAM_GROUP=g", instead: "Tuning.StreamGroup"},
		{name: "flag_instead", env: "SECKILL_MIGRATE=false", instead: "--no-migrate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, _, _ := strings.Cut(tt.env, "=")
			env := []string{"PATH=/bin", tt.env, "SECKILL_QUEUE=stream"}
			var buf bytes.Buffer
			infra.WarnUnknownVariables(zerolog.New(&buf), env)
			out := buf.String()
			if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"level":"warn"`) ||
				!strings.Contains(out, name+" is no longer read") || !strings.Contains(out, tt.instead) || strings.Contains(out, "unknown") {
				t.Fatalf("logged %q, want one warning that %s is no longer read, naming %s", out, name, tt.instead)
			}
			vars := map[string]string{}
			for _, kv := range env {
				if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SECKILL_") {
					vars[k] = v
				}
			}
			if _, err := infra.LoadConfigFrom(vars); err != nil {
				t.Fatalf("the service does not start with %s set: %v", name, err)
			}
		})
	}
}

// TestRemovedVariablesAreNoLongerRead: no setting reads a removed name, so
// the list cannot name a variable that is still a setting.
func TestRemovedVariablesAreNoLongerRead(t *testing.T) {
	for _, v := range infra.ConfigVariables() {
		if got := infra.RemovedVariables([]string{v.Name + "=x"}); len(got) != 0 {
			t.Errorf("%s is read by the service and listed as removed", v.Name)
		}
	}
}
