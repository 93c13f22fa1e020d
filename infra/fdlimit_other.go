//go:build !unix

package infra

// RaiseFileLimit does nothing where there is no RLIMIT_NOFILE.
func RaiseFileLimit() (uint64, error) { return 0, nil }

func fileLimit() uint64 { return 0 }
