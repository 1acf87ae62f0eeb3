//go:build race

package raftfsm

// raceEnabled: under -race, large-state tests run at a tenth of the scale.
const raceEnabled = true
