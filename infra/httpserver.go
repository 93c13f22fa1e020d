package infra

import (
	"net/http"
	"time"
)

// MaxHeaderBytes bounds a request's header. Go's default, 1 MiB, let 800
// connections sending unfinished 1 MiB headers grow the process from 29 MB
// to 3.4 GB; the hmdp page sends well under 1 KiB. Over it: 431.
const MaxHeaderBytes = 16 << 10

// The API server's timeouts. IdleTimeout is short because an idle keep-alive
// holds a file and a goroutine; a reverse proxy's upstream keep-alive must be
// shorter still (nginx: keepalive_timeout in the upstream block), or it may
// send a request on a connection this side is closing.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 30 * time.Second
)

// newAPIServer is the API's server.
func newAPIServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
