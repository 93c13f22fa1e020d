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
