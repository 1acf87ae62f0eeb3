package dedup

import "testing"

func TestIsDuplicate(t *testing.T) {
	const hour = int64(3600_000)
	stored := Entry{Offset: 7, StoredAtMs: 1_000_000, ExpiresAtMs: 1_000_000 + hour}
	tests := []struct {
		name     string
		found    bool
		windowMs int64
		nowMs    int64
		want     bool
	}{
		{"never stored", false, hour, 1_000_001, false},
		{"same instant", true, hour, 1_000_000, true},
		{"inside window", true, hour, 1_000_000 + hour - 1, true},
		{"window just ended", true, hour, 1_000_000 + hour, false},
		{"long after window", true, hour, 1_000_000 + 10*hour, false},
		{"window zero is off", true, 0, 1_000_001, false},
		{"negative window is off", true, -5, 1_000_001, false},
		// A new leader's clock may lag; the replicated clock prevents it,
		// but a time before the store time must still count as inside.
		{"entry time before store time", true, hour, 999_000, true},
		{"one-millisecond window", true, 1, 1_000_000, true},
		{"one-millisecond window passed", true, 1, 1_000_001, false},
		{"window shrunk since storing", true, 60_000, 1_000_000 + 60_000, false},
		{"window grown since storing: old expiry holds", true, 2 * hour, 1_000_000 + hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsDuplicate(stored, tt.found, tt.windowMs, tt.nowMs); got != tt.want {
				t.Fatalf("IsDuplicate(found=%v, window=%d, now=%d) = %v, want %v",
					tt.found, tt.windowMs, tt.nowMs, got, tt.want)
			}
		})
	}
}

func TestRequestScopesByPartitionAndID(t *testing.T) {
	var r Request
	if _, ok := r.Seen(1, "a"); ok {
		t.Fatal("zero Request has seen an id")
	}
	r.Remember(1, "a", Entry{Offset: 3})
	e, ok := r.Seen(1, "a")
	if !ok || e.Offset != 3 {
		t.Fatalf("Seen(1,a) = %+v, %v; want offset 3, true", e, ok)
	}
	if _, ok := r.Seen(2, "a"); ok {
		t.Fatal("id seen in partition 1 counted for partition 2")
	}
	if _, ok := r.Seen(1, "b"); ok {
		t.Fatal("unrelated id reported seen")
	}
}
