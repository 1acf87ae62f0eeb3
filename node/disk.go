package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/waggle-mq/waggle/broker"
	"github.com/waggle-mq/waggle/raftnode"
)

// Badger writes its memtable through a memory map: when the disk fills up
// under it, the page fault kills the process with SIGBUS, mid-write. Its
// log is checksummed, so a restart recovers, but an operator deserves a
// clear reason, so a node stops by itself while its data directory still
// has --min-free-disk-mib left, and will not start below it.

// diskCheckEvery is how often watchFreeSpace looks at the data directory.
const diskCheckEvery = 250 * time.Millisecond

// freeBytes is the space left to unprivileged writers on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, err
	}
	return fs.Bavail * uint64(fs.Bsize), nil
}

// diskUsage is the bytes in use and the size of dir's file system, as df
// counts them (used includes the blocks reserved for root).
func diskUsage(dir string) (used, total uint64, err error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, 0, err
	}
	total = fs.Blocks * uint64(fs.Bsize)
	return total - fs.Bfree*uint64(fs.Bsize), total, nil
}

// StorageHeadroomMiB is the least gap between the space at which a node
// refuses writes (--storage-min-free-mib) and the space at which it stops
// (--min-free-disk-mib). Refusing is not instant: the free space is looked
// at four times a second, up to 32 MiB of HTTP bodies may be in the works
// when it is, and an entry that fills the raft log's segment makes the next
// one, 64 MiB allocated at once. 32 concurrent pushers and 4 producers
// took a tmpfs 54-56 MiB past the refusal, and with a gap of 40 MiB the
// node stopped (integration test
// TestConcurrentWritersFillingTheDiskGetRefusedNotStopped).
const StorageHeadroomMiB = 96

// checkStorageHeadroom refuses a pair of thresholds too close to keep a
// node that refuses writes from running out of room and stopping.
func checkStorageHeadroom(storageMinFree, minFree uint64) error {
	if storageMinFree == 0 || minFree == 0 || storageMinFree >= minFree+StorageHeadroomMiB {
		return nil
	}
	return fmt.Errorf("--storage-min-free-mib %d is too close to --min-free-disk-mib %d: writes in flight when writes are refused, "+
		"and the raft log's next 64 MiB segment, can take %d MiB more, and the node would stop instead of refusing writes; "+
		"set --storage-min-free-mib to %d or more (or --min-free-disk-mib lower)", storageMinFree, minFree, StorageHeadroomMiB, minFree+StorageHeadroomMiB)
}

// checkFreeSpace reports an error when dir has less than min bytes free.
func checkFreeSpace(dir string, min uint64) error {
	free, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if free < min {
		return diskNearlyFull(dir, free, min)
	}
	return nil
}

func diskNearlyFull(dir string, free, min uint64) error {
	return fmt.Errorf("disk nearly full: %d MiB free in %s, below --min-free-disk-mib %d (no space left on device soon); free some space and start again",
		free>>20, dir, min>>20)
}

// watchFreeSpace checks dir every interval and tells full whether it has
// less than reserve bytes free, so writes that add data are refused while
// reads, acks, deletes and retention go on (the operator frees space
// without a restart). Below min bytes, or when dir is gone (deleted or
// unmounted under the node: nothing written from then on would last), it
// sends one error and returns: the node stops. A reserve or min of 0 is
// off. wg counts the goroutine it starts.
func watchFreeSpace(ctx context.Context, wg *sync.WaitGroup, dir string, min, reserve uint64, interval time.Duration, full func(bool), log *slog.Logger) <-chan error {
	low := make(chan error, 1)
	wasFull := false
	check := func() bool {
		free, err := freeBytes(dir)
		if errors.Is(err, fs.ErrNotExist) {
			low <- fmt.Errorf("the data directory %s is gone (deleted or unmounted under the running node): writes would be lost; restore it or repair the node from its peers", dir)
			return false
		}
		if err != nil {
			log.Warn("free space unknown", "dir", dir, "err", err)
			return true
		}
		if min > 0 && free < min {
			low <- diskNearlyFull(dir, free, min)
			return false
		}
		isFull := reserve > 0 && free < reserve
		full(isFull)
		if isFull != wasFull {
			wasFull = isFull
			if isFull {
				log.Error("storage full: refusing writes that add data until space is freed", "dir", dir,
					"free_mib", free>>20, "storage_min_free_mib", reserve>>20)
			} else {
				log.Info("storage no longer full: accepting writes", "dir", dir, "free_mib", free>>20)
			}
		}
		return true
	}
	if !check() {
		return low
	}
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !check() {
					return
				}
			}
		}
	})
	return low
}

// storageFull marks the service full or not, and has a leader whose disk
// is full hand leadership (at most every 5 s) to a voter whose /health
// says its storage is not full: that node can take the writes this one
// refuses. With no such voter it keeps leading: moving leadership round
// nodes that are all full would only interrupt the reads, acks and
// retention that still work. Its questions to the voters end with ctx.
func storageFull(ctx context.Context, svc *broker.Service, client *http.Client, scheme string, log *slog.Logger) func(bool) {
	var lastHandOff time.Time
	return func(full bool) {
		svc.SetStorageFull(full)
		if !full || !svc.IsLeader() || time.Since(lastHandOff) < 5*time.Second {
			return
		}
		lastHandOff = time.Now()
		to, ok := voterWithRoom(ctx, svc, client, scheme)
		if !ok {
			log.Warn("storage full, and no other voter reports room: keeping leadership")
			return
		}
		if err := svc.HandOffTo(to); err != nil {
			log.Warn("storage full: leadership hand-off failed", "to", to.ID, "err", err)
		} else {
			log.Warn("storage full: handed leadership to a voter with room", "to", to.ID)
		}
	}
}

// voterWithRoom returns another voter whose /health answers that its
// storage is not full.
func voterWithRoom(ctx context.Context, svc *broker.Service, client *http.Client, scheme string) (broker.Member, bool) {
	members, err := svc.Members()
	if err != nil {
		return broker.Member{}, false
	}
	for _, m := range members {
		if !m.Voter || m.ID == svc.NodeID() || m.HTTPAddr == "" {
			continue
		}
		h, err := fetchPeerHealth(ctx, client, scheme, m.HTTPAddr)
		if err == nil && h.StorageFull != nil && !*h.StorageFull {
			return m, true
		}
	}
	return broker.Member{}, false
}

// DamageError is what a start-up check (Config.VerifyDataDir) found wrong
// with a raft group's directory: a node with peers moves the directory
// aside and repairs it from them; a single node refuses to start.
type DamageError struct{ Detail string }

func (e *DamageError) Error() string { return "damaged: " + e.Detail }

// verifyInProcess is the start-up check when Config.VerifyDataDir is nil:
// raftnode's, in this process, with its findings sorted as the child
// process waggle serve runs sorts them (in use and unreadable are
// refusals, anything else is damage).
func verifyInProcess(dir string) error {
	err := raftnode.VerifyDataDirAtStart(dir)
	switch {
	case err == nil, errors.Is(err, raftnode.ErrNoData):
		return nil
	case errors.Is(err, raftnode.ErrDataDirInUse), errors.Is(err, raftnode.ErrDataDirUnreadable):
		return err
	default:
		return &DamageError{Detail: err.Error()}
	}
}
