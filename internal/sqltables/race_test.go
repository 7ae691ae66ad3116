//go:build race

package sqltables_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// Analyze may allocate an Analyzer.
const raceEnabled = true
