package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// Every command's --help says what it does and lists its flag spelt as
// README writes it, never with the one dash the flag package prints: token
// and reconcile printed Go's bare flag list, serve and migrate -no-migrate
// and -force.
func TestEveryCommandsHelpSaysWhatItDoes(t *testing.T) {
	for _, tc := range []struct{ cmd, usage, says, flag string }{
		{"serve", "usage: seckill serve [--no-migrate]", "drains the queue", "no-migrate"},
		{"token", "usage: seckill token --user ID [--count N]", "Mints hmdp login tokens", "count"},
		{"reconcile", "usage: seckill reconcile --voucher ID [--fix]", "source of truth", "fix"},
		{"migrate", "usage: seckill migrate up|status", "rolls back the newest migration", "force"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(t.Context(), []string{tc.cmd, "--help"}, &out, &errOut)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("%s --help: %v", tc.cmd, err)
			}
			help := errOut.String()
			for _, want := range []string{tc.usage, tc.says, "\n  --" + tc.flag + "\n"} {
				if !strings.Contains(help, want) {
					t.Fatalf("%s --help lacks %q:\n%s", tc.cmd, want, help)
				}
			}
			if strings.Contains(help, " -"+tc.flag) {
				t.Fatalf("%s --help spells -%s with one dash:\n%s", tc.cmd, tc.flag, help)
			}
		})
	}
}

// A value given without its flag is refused before anything is touched, not
// dropped: `token --user 1 5` minted one token where five were meant.
func TestCommandsRefuseStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "now"},
		{"token", "--user", "1", "5"},
		{"reconcile", "--voucher", "7", "fix"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(t.Context(), args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), args[0]+": unexpected arguments") {
				t.Fatalf("%q: got %v, want the stray argument refused", args, err)
			}
			if !strings.Contains(errOut.String(), "usage: seckill "+args[0]) {
				t.Fatalf("%q printed no usage:\n%s", args, errOut.String())
			}
		})
	}
}
