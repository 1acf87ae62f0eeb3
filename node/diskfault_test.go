package node

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/waggle-mq/waggle/store"
)

// A disk fault stops the node with one line naming the file and the error
// and a non-zero exit; damage also leaves the marker that the next start
// reads as damage.
func TestFaultStopsWithOneLineAndDamageLeavesTheMarker(t *testing.T) {
	var out bytes.Buffer
	code := -1
	stop := faultStop(slog.New(slog.NewTextHandler(&out, nil)), func(c int) { code = c })
	stop(&store.Fault{Op: "fsync", Path: "/data/raft/wal/00001.wal", Err: syscall.EIO})
	line := out.String()
	if code != FaultExitCode || strings.Count(line, "\n") != 1 ||
		!strings.Contains(line, "disk fault: fsync /data/raft/wal/00001.wal: input/output error; stopping") {
		t.Fatalf("exit %d, log %q", code, line)
	}

	group := t.TempDir()
	if err := os.Mkdir(filepath.Join(group, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, found := damageFound(group); found {
		t.Fatal("damage found in a new directory")
	}
	out.Reset()
	code = -1
	seg := filepath.Join(group, "state", "segments", "3", "00000000000000000000.seg")
	stop = faultStop(slog.New(slog.NewTextHandler(&out, nil)), func(c int) { code = c })
	stop(&store.Fault{Op: "read", Path: seg, Err: errors.New("segment: damaged record"), Damage: true,
		Marker: filepath.Join(group, "state", store.DamageMarkerFile)})
	if code != FaultExitCode || !strings.Contains(out.String(), "damage found: read "+seg+": segment: damaged record; stopping without serving it (the next start repairs") {
		t.Fatalf("exit %d, log %q", code, out.String())
	}
	found, ok := damageFound(group)
	if !ok || !strings.Contains(found, seg) {
		t.Fatalf("marker: %q %v", found, ok)
	}
}
