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

// buildVersion says what this binary is: its version, the commit it was built
// from (with "+dirty" when the tree had uncommitted changes), and the Go that
// compiled it, which is what decides the standard library's security fixes.
type buildVersion struct{ Version, Commit, Go string }

func currentVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		if v.Commit == "" {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" && modified == "true" {
				rev += "+dirty"
			}
			v.Commit = rev
		}
	}
	v.Version = cmp.Or(v.Version, "dev")
	v.Commit = cmp.Or(v.Commit, "unknown")
	return v
}

func printVersion(w io.Writer) {
	v := currentVersion()
	fmt.Fprintf(w, "seckill %s\ncommit  %s\ngo      %s %s/%s\n", v.Version, v.Commit, v.Go, runtime.GOOS, runtime.GOARCH)
}
