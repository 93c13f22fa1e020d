// Package contract_test holds one contract suite per port, each run against
// every adapter of that port (the memory fakes, miniredis and SQLite, real
// Redis and MySQL when the test environment names them), so that "the same
// behaviour everywhere" is proven rather than assumed.
package contract_test
