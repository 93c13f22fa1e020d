//go:build pprof

package main

import (
	"io"
	"net/http"
	"net/http/pprof"
	"os"
)

// startProfiler serves net/http/pprof on $PPROF_ADDR (default 127.0.0.1:6060) in a `-tags pprof` build.
func startProfiler(stderr io.Writer) {
	addr := os.Getenv("PPROF_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6060"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			_, _ = io.WriteString(stderr, "pprof: "+err.Error()+"\n")
		}
	}()
}
