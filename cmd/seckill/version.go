package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Set by `make build` (-ldflags -X); else the build info's VCS stamp stands in.
var (
	version string
	commit  string
)

// printVersion prints the version, the commit ("+dirty" for uncommitted
// changes) and the Go that compiled it (the standard library's fixes).
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
