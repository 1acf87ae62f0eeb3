package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Dedup index files keep a sealed dedup segment's sorted index array
// (dedupindex.go) beside the store, so that opening a store reads 8 bytes
// an id instead of scanning the segment and hashing every id in it: 20 M
// ids are 160 MB to read rather than a gigabyte of log to decode.
//
// They are derived and node-local like the index itself: written in the
// background when a segment is sealed, removed when it is dropped, never
// replicated nor fsynced. A segment is named by its stream, base and end,
// and a stream's bytes are the same on every replica and after every
// restore (the segment store keeps a local file across a restore on the
// same grounds), so a file that names a sealed segment and passes its
// checksum holds that segment's ids; any other file is removed when the
// index is loaded, all of them when the store is reset, and a segment
// without a file is scanned as before (and gets one). A damaged segment
// whose file is good is then not noticed at open but when a lookup reads
// it (the read fails, never answers "new") or by waggle verify.
//
// One file, <dir>/<stream, 16 hex digits>-<base, 20 digits>.idx:
//
//	"WDX1" stream(8) base(8) end(8) count(8) count x key(8) crc32c(4)
//
// big-endian header, little-endian keys, the CRC-32C of everything
// before it. Version 1 keys are dedupFingerprint<<32 | record position
// minus base; a change to the fingerprint or the key needs a new magic.
const dedupIndexDirName = "dedup-index"

var dedupIndexMagic = []byte("WDX1")

const dedupIndexHeader = 4 + 8 + 8 + 8 + 8

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// dedupIndexFiles writes and removes index files, one job at a time, off
// the apply path.
type dedupIndexFiles struct {
	dir string // "" keeps no files (a store without a directory, tests)
	log Logger // nil: failures go unreported (they cost a scan, nothing else)

	mu      sync.Mutex
	jobs    []func()
	running sync.WaitGroup
}

func dedupIndexFileName(stream, base uint64) string {
	return fmt.Sprintf("%016x-%020d.idx", stream, base)
}

// parseDedupIndexFileName is dedupIndexFileName's inverse.
func parseDedupIndexFileName(name string) (stream, base uint64, ok bool) {
	var rest string
	if n, err := fmt.Sscanf(name, "%016x-%020d%s", &stream, &base, &rest); n != 3 || err != nil || rest != ".idx" {
		return 0, 0, false
	}
	return stream, base, name == dedupIndexFileName(stream, base)
}

// enqueue runs job after the jobs before it, in the background.
func (f *dedupIndexFiles) enqueue(job func()) {
	if f.dir == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, job)
	if len(f.jobs) > 1 {
		return // the running worker takes it
	}
	f.running.Add(1)
	go func() {
		defer f.running.Done()
		for {
			f.mu.Lock()
			job := f.jobs[0]
			f.mu.Unlock()
			job()
			f.mu.Lock()
			f.jobs[0] = nil // let go of the keys it held
			f.jobs = f.jobs[1:]
			done := len(f.jobs) == 0
			f.mu.Unlock()
			if done {
				return
			}
		}
	}()
}

// wait waits until every job enqueued so far has run. Jobs are enqueued
// by commits, which the state machine never runs beside a close, reset or
// restore, the callers of wait.
func (f *dedupIndexFiles) wait() { f.running.Wait() }

// write saves a sealed segment's keys (which never change) in the
// background. A failure costs the next open a scan, nothing else.
func (f *dedupIndexFiles) write(stream, base, end uint64, keys []uint64) {
	f.enqueue(func() {
		path := filepath.Join(f.dir, dedupIndexFileName(stream, base))
		if err := writeDedupIndexFile(path, stream, base, end, keys); err != nil {
			os.Remove(path)
			if f.log != nil {
				f.log.Warningf("dedup index file %s not written (the next start scans the segment instead): %v", path, err)
			}
		}
	})
}

// clear removes every file (the store was emptied); call it with no job
// running.
func (f *dedupIndexFiles) clear() {
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
}

// remove deletes the files of segments dropped from a stream.
func (f *dedupIndexFiles) remove(stream uint64, bases []uint64) {
	f.enqueue(func() {
		for _, base := range bases {
			os.Remove(filepath.Join(f.dir, dedupIndexFileName(stream, base)))
		}
	})
}

func writeDedupIndexFile(path string, stream, base, end uint64, keys []uint64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	head := make([]byte, 0, dedupIndexHeader)
	head = append(head, dedupIndexMagic...)
	for _, v := range []uint64{stream, base, end, uint64(len(keys))} {
		head = binary.BigEndian.AppendUint64(head, v)
	}
	body := make([]byte, 8*len(keys))
	for i, k := range keys {
		binary.LittleEndian.PutUint64(body[8*i:], k)
	}
	crc := crc32.Update(crc32.Checksum(head, castagnoliTable), castagnoliTable, body)
	tmp := path + ".tmp"
	file, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = file.Write(head)
	if err == nil {
		_, err = file.Write(body)
	}
	if err == nil {
		_, err = file.Write(binary.BigEndian.AppendUint32(nil, crc))
	}
	if err = errors.Join(err, file.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// readDedupIndexFile reads the keys of segment [base, end) of stream, or
// answers false when the file is missing, damaged or names another
// segment.
func readDedupIndexFile(path string, stream, base, end uint64) ([]uint64, bool) {
	raw, err := os.ReadFile(path)
	if err != nil || len(raw) < dedupIndexHeader+4 || string(raw[:4]) != string(dedupIndexMagic) {
		return nil, false
	}
	count := binary.BigEndian.Uint64(raw[28:])
	if binary.BigEndian.Uint64(raw[4:]) != stream || binary.BigEndian.Uint64(raw[12:]) != base ||
		binary.BigEndian.Uint64(raw[20:]) != end || count > uint64(len(raw)) || uint64(len(raw)) != dedupIndexHeader+8*count+4 {
		return nil, false
	}
	n := len(raw) - 4
	if crc32.Checksum(raw[:n], castagnoliTable) != binary.BigEndian.Uint32(raw[n:]) {
		return nil, false
	}
	keys := make([]uint64, count)
	for i := range keys {
		keys[i] = binary.LittleEndian.Uint64(raw[dedupIndexHeader+8*i:])
		// Sorted, and every position inside the segment, or the binary
		// search of a lookup could pass an id by: damaged, scan instead.
		if uint64(uint32(keys[i])) >= end-base || i > 0 && keys[i] < keys[i-1] {
			return nil, false
		}
	}
	return keys, true
}

// listDedupIndexFiles names the index files in dir by segment; files that
// are not index files (a write cut short) are removed.
func listDedupIndexFiles(dir string) map[[2]uint64]string {
	out := map[[2]uint64]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		stream, base, ok := parseDedupIndexFileName(e.Name())
		if !ok {
			if strings.HasSuffix(e.Name(), ".tmp") {
				os.Remove(filepath.Join(dir, e.Name()))
			}
			continue
		}
		out[[2]uint64{stream, base}] = filepath.Join(dir, e.Name())
	}
	return out
}
