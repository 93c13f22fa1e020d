package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set by `make build` (-ldflags -X): git describe and the full commit. A
// plain `go build` leaves them empty and the build info's VCS stamp (when
// -buildvcs is on) stands in.
var (
	version string
	commit  string
)

// printVersion says what this binary is: its version, the commit it was built
// from (with "+dirty" when the tree had uncommitted changes), and the Go that
// compiled it, which is what decides the standard library's security fixes.
func printVersion(w io.Writer) {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		if c == "" {
			dirty := false
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					c = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if c != "" && dirty {
				c += "+dirty"
			}
		}
	}
	fmt.Fprintf(w, "seckill %s\ncommit  %s\ngo      %s %s/%s\n", cmp.Or(v, "dev"), cmp.Or(c, "unknown"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
