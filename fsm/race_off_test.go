//go:build !race

package fsm

// raceEnabled: under -race, large-state tests run at a tenth of the scale.
const raceEnabled = false
