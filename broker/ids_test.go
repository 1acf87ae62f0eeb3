package broker

import (
	"errors"
	"testing"
)

// Regression: a transaction's ack read partitionId with fmt.Sscan, which
// took "12abc", " 12" and "0x1f" that /api/v1/ack refused. Both now use
// parsePartitionID, which takes only the form the broker hands out.
func TestParsePartitionID(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"12", 12, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"", 0, false},
		{"12abc", 0, false},
		{" 12", 0, false},
		{"12 ", 0, false},
		{"0x1f", 0, false},
		{"+12", 0, false},
		{"-1", 0, false},
		{"012", 0, false},
		{"1_2", 0, false},
		{"18446744073709551616", 0, false},
	} {
		got, err := parsePartitionID(c.in)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("parsePartitionID(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if !c.ok && (err == nil || !errors.Is(err, ErrInvalid)) {
			t.Errorf("parsePartitionID(%q) = %d, %v; want ErrInvalid", c.in, got, err)
		}
	}
}
