package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Badger writes its memtable through a memory map: when the disk fills up
// under it, the page fault kills the process with SIGBUS, mid-write. Its
// log is checksummed, so a restart recovers, but an operator deserves a
// clear reason, so a node stops by itself while its data directory still
// has --min-free-disk-mib left, and will not start below it.

// freeBytes is the space left to unprivileged writers on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, err
	}
	return fs.Bavail * uint64(fs.Bsize), nil
}

// checkFreeSpace reports an error when dir has less than min bytes free.
func checkFreeSpace(dir string, min uint64) error {
	free, err := freeBytes(dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", dir, err)
	}
	if free < min {
		return fmt.Errorf("disk nearly full: %d MiB free in %s, below --min-free-disk-mib %d (no space left on device soon); free some space and start again",
			free>>20, dir, min>>20)
	}
	return nil
}

// watchFreeSpace checks dir every interval and sends one error when its
// free space drops below min.
func watchFreeSpace(ctx context.Context, dir string, min uint64, interval time.Duration) <-chan error {
	low := make(chan error, 1)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := checkFreeSpace(dir, min); err != nil {
					low <- err
					return
				}
			}
		}
	}()
	return low
}
