package node

import "testing"

func TestDiskUsageOfATempDir(t *testing.T) {
	used, total, err := diskUsage(t.TempDir())
	if err != nil || total == 0 || used > total {
		t.Fatalf("diskUsage = %d, %d, %v", used, total, err)
	}
}
