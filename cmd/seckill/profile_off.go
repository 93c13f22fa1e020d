//go:build !pprof

package main

import "io"

// startProfiler does nothing in the default build: see profile_pprof.go.
func startProfiler(io.Writer) {}
