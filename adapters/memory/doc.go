// Package memory holds in-memory, concurrency-safe fakes of every port, with the same behaviour as the real adapters (proven by the contract suites in test/contract), for unit and component tests.
package memory
