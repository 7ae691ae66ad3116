//go:build !race

package sqltables_test

const raceEnabled = false
