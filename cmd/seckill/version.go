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

// printVersion prints the version, the commit ("+dirty" for uncommitted changes) and the Go that built it.
func printVersion(w io.Writer) {
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		vcs := map[string]string{}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
		if c == "" && vcs["vcs.revision"] != "" {
			c = vcs["vcs.revision"]
			if vcs["vcs.modified"] == "true" {
				c += "+dirty"
			}
		}
	}
	fmt.Fprintf(w, "seckill %s\ncommit  %s\ngo      %s %s/%s\n", cmp.Or(v, "dev"), cmp.Or(c, "unknown"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
