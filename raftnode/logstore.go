package raftnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	bolt "go.etcd.io/bbolt"
)

// The raft log and raft's term and vote live in raft/wal, kept by
// hashicorp/raft-wal: append-only segment files with one fsync per append
// batch and no memory-mapped file (raft-boltdb, which the first releases
// used, fsynced twice per commit and mapped its whole file: under a 1 KB
// produce load it wrote 97,000 records/s with a peak RSS of 1.2 GB where
// raft-wal writes 122,000 with 583 MB). The term and vote sit in the WAL's
// own small bolt file, raft/wal/wal-meta.db.
const (
	walDir       = "wal"
	legacyLogDB  = "raft.db" // raft-boltdb's file, before the WAL
	walMetaFile  = "wal-meta.db"
	migrationDir = "wal.migrating"
)

// stableKeys are the keys raft and waggle keep in the stable store, as
// integers or bytes.
var (
	stableIntKeys  = [][]byte{keyCurrentTerm, keyLastVoteTerm, keyNoVoteThroughTerm}
	stableByteKeys = [][]byte{keyLastVoteCand}
)

// walLog is raft-wal's WAL with one correction (see GetLog) and a
// compaction that keeps what message data still needs (see DeleteRange).
type walLog struct {
	*wal.WAL
	holder *logHolder // nil: delete what raft asks
}

// GetLog implements raft.LogStore. raft-wal v0.4.2 still answers entries of
// its active segment that a compaction removed (only its sealed segments
// check the first index); raft must see them gone, so that a follower
// behind the compacted log gets the snapshot, as with any other store.
func (l *walLog) GetLog(index uint64, log *raft.Log) error {
	if first, err := l.WAL.FirstIndex(); err != nil {
		return err
	} else if index < first {
		return raft.ErrLogNotFound
	}
	return l.WAL.GetLog(index, log)
}

// openWAL opens (creating) the WAL in dir. v0.4.2 or later is needed: v0.4.0
// left a tail truncation's segment sealed without its index, and the node
// could not start again (raft-wal issue 31; found by the chaos run).
func openWAL(dir string, logger hclog.Logger) (*walLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w, err := wal.Open(dir, wal.WithLogger(logger.Named("wal")))
	if err != nil {
		return nil, err
	}
	return &walLog{WAL: w}, nil
}

// openLogStore opens the raft log under raftDir, first moving a log that
// raft-boltdb kept there into the WAL.
func openLogStore(raftDir string, logger hclog.Logger) (*walLog, error) {
	dir := filepath.Join(raftDir, walDir)
	legacy := filepath.Join(raftDir, legacyLogDB)
	if _, err := os.Stat(legacy); err == nil {
		if _, err := os.Stat(dir); err == nil {
			// Moved over before a crash that came before the old file went.
			if err := os.Remove(legacy); err != nil {
				return nil, err
			}
		} else if err := migrateBoltLog(legacy, dir, logger); err != nil {
			return nil, fmt.Errorf("move the raft log from %s to %s: %w", legacy, dir, err)
		}
	}
	return openWAL(dir, logger)
}

// migrateBoltLog copies a raft-boltdb log, term and vote into a new WAL
// beside it, renames it into place, then removes the old file.
func migrateBoltLog(legacy, dir string, logger hclog.Logger) error {
	tmp := filepath.Join(filepath.Dir(dir), migrationDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: legacy, BoltOptions: &bolt.Options{Timeout: time.Second}})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openWAL(tmp, logger)
	if err != nil {
		return err
	}
	start := time.Now()
	err = migrate.CopyLogs(context.Background(), dst, src, 8<<20, nil)
	if err == nil {
		err = copyStable(dst, src)
	}
	if err := errors.Join(err, dst.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	logger.Info("moved the raft log to raft-wal", "from", legacy, "took", time.Since(start))
	return os.Remove(legacy) // still open until the deferred Close: unlinking it is fine
}

// copyStable copies the stable keys that are set (raft-boltdb answers an
// error for a key never written).
func copyStable(dst, src raft.StableStore) error {
	for _, k := range stableIntKeys {
		if v, err := src.GetUint64(k); err == nil {
			if err := dst.SetUint64(k, v); err != nil {
				return err
			}
		}
	}
	for _, k := range stableByteKeys {
		if v, err := src.Get(k); err == nil {
			if err := dst.Set(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
