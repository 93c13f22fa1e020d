package e2e_test

// outageQueues are the queue drivers the outage test runs.
var outageQueues = []string{"channel", "stream"}
