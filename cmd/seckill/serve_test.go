package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// README writes --no-migrate; the help printed -no-migrate.
func TestServeHelpSpellsFlagsAsREADMEDoes(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"serve", "--help"}, &out, &errOut)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve --help: %v", err)
	}
	help := errOut.String()
	if !strings.Contains(help, "usage: seckill serve [--no-migrate]") || !strings.Contains(help, "  --no-migrate\n") {
		t.Fatalf("help does not spell --no-migrate:\n%s", help)
	}
	if strings.Contains(help, " -no-migrate") {
		t.Fatalf("help still spells -no-migrate:\n%s", help)
	}
}

// Every command's --help says what it does and spells its flags as README
// does; token and reconcile printed Go's bare flag list.
func TestEveryCommandsHelpSaysWhatItDoes(t *testing.T) {
	for _, tc := range []struct{ cmd, usage, says, flag string }{
		{"serve", "usage: seckill serve [--no-migrate]", "drains the queue", "--no-migrate"},
		{"token", "usage: seckill token --user ID [--count N]", "Mints hmdp login tokens", "--count"},
		{"reconcile", "usage: seckill reconcile --voucher ID [--fix]", "source of truth", "--fix"},
		{"migrate", "usage: seckill migrate up|status", "rolls back the newest migration", "-force"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(t.Context(), []string{tc.cmd, "--help"}, &out, &errOut)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("%s --help: %v", tc.cmd, err)
			}
			help := errOut.String()
			for _, want := range []string{tc.usage, tc.says, tc.flag} {
				if !strings.Contains(help, want) {
					t.Fatalf("%s --help lacks %q:\n%s", tc.cmd, want, help)
				}
			}
		})
	}
}
