package main

import "testing"

func TestHumanBytes(t *testing.T) {
	for b, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB", 2 << 40: "2.0 TiB"} {
		if got := humanBytes(b); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", b, got, want)
		}
	}
	used, total := uint64(1<<30), uint64(4<<30)
	if got := diskShare(&used, &total); got != "1.0 GiB/4.0 GiB (25%)" {
		t.Errorf("diskShare = %q", got)
	}
	if got := diskShare(nil, &total); got != "-" {
		t.Errorf("diskShare without used = %q", got)
	}
}
