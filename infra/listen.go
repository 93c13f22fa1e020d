package infra

import (
	"errors"
	"fmt"
	"syscall"
)

// listenError names the variable that chose the address, so an operator who
// meets a port clash knows what to change. Two instances on one host clash on
// both listeners, the second only after the first is moved, so a clash on
// either names both variables.
func listenError(what, variable, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen for %s on %s: the address is taken by another process: "+
			"set %s to a free host:port (a second instance on one host also needs "+
			"SECKILL_HTTP_ADDR and SECKILL_METRICS_ADDR apart from the first's; SECKILL_METRICS_ADDR=off disables metrics): %w",
			what, addr, variable, err)
	}
	return fmt.Errorf("listen for %s on %s (set by %s): %w", what, addr, variable, err)
}
