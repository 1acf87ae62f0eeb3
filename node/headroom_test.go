package node

import (
	"strings"
	"testing"
)

func TestStorageThresholdsTooCloseAreRefused(t *testing.T) {
	for _, c := range []struct {
		storageMinFree, minFree uint64
		ok                      bool
	}{
		{1024, 64, true},
		{64 + StorageHeadroomMiB, 64, true},
		{120, 64, false}, // 32 pushers took a node with these from 120 to 47 MiB free
		{63 + StorageHeadroomMiB, 64, false},
		{0, 64, true},  // never refuses writes: nothing to keep apart
		{120, 0, true}, // never stops
	} {
		err := checkStorageHeadroom(c.storageMinFree, c.minFree)
		if (err == nil) != c.ok {
			t.Errorf("--storage-min-free-mib %d, --min-free-disk-mib %d: %v, want ok %v", c.storageMinFree, c.minFree, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "too close") {
			t.Errorf("unclear refusal: %v", err)
		}
	}
}
