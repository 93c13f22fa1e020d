//go:build !race

package httpapi_test

const raceAllocs = 0
