//go:build !race

package integration

// raceBuild: the test binary runs under the race detector, so the waggle
// binary is built with -race as well.
const raceBuild = false
