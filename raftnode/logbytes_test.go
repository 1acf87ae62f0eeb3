package raftnode

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestSnapshotSpacingStretchesWithTheState(t *testing.T) {
	base := raft.Config{TrailingLogs: 20480, SnapshotThreshold: 16384}
	const mib = 1 << 20
	cases := []struct {
		name                  string
		bytes, entries, every uint64
		wantTrailing, wantThr uint64
	}{
		{"nothing applied", 0, 0, 256 * mib, 20480, 16384},
		{"small entries keep the base", 100 * mib, 1 << 20, 256 * mib, 20480, 16384},
		{"1 MiB entries keep 256 of them", 1024 * mib, 1024, 256 * mib, 256, 16384},
		{"state of 1 GiB spaces raft's trigger four times", 100 * mib, 1 << 20, 1024 * mib, 20480, 4 * 16384},
	}
	for _, c := range cases {
		got := spacing(base, c.bytes, c.entries, c.every)
		if got.trailing != c.wantTrailing || got.threshold != c.wantThr {
			t.Errorf("%s: got %+v, want trailing %d threshold %d", c.name, got, c.wantTrailing, c.wantThr)
		}
	}
}
