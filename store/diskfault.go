package store

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/waggle-mq/waggle/segment"
)

// A disk that fails a write or an fsync of durable state leaves the file
// in a state nobody knows: after a failed fsync Linux marks the dirty
// pages clean, so a retry "succeeds" without writing them (PostgreSQL's
// "fsyncgate", 2018). A node that goes on could acknowledge what the disk
// lost. And a record whose checksum does not match must never be served.
// Both are faults of the node, not of a request: the layer that meets one
// hands it to the process's fault handler (HandleFaults, set by the node,
// which stops it at once) before it returns the error, so no caller up the
// stack (the state machine, raft) gets to retry it or panic over it.

// ErrDiskFault reports a write or fsync of durable state that failed (a
// *Fault with Damage false): the node must stop, not retry.
var ErrDiskFault = errors.New("disk fault")

// ErrDamageFound reports a record or raft log entry that a running node
// read and whose checksum did not match (a *Fault with Damage true): the
// node must stop and have its next start repair it from its peers.
var ErrDamageFound = errors.New("damage found")

// DamageMarkerFile is the file a node leaves in a raft group's state
// directory (beside badger's files) when it finds damage while running.
// A start that finds it repairs the group from its peers, as when the
// start-up check finds damage; the repair moves it aside with the rest.
const DamageMarkerFile = "damage-found"

// Fault is a disk fault or damage found at run time.
type Fault struct {
	// Op is what failed: "write" or "fsync" for a disk fault, "read"
	// for damage.
	Op string
	// Path is the file (or, when unknown, the directory) it happened in.
	Path string
	// Err is the error the operation answered, or what the check found.
	Err error
	// Damage marks a checksum that did not match; else the disk failed.
	Damage bool
	// Marker, for damage, is the DamageMarkerFile to leave so the next
	// start repairs the raft group from its peers.
	Marker string
}

// Error reads "fsync <path>: input/output error".
func (f *Fault) Error() string { return f.Op + " " + f.Path + ": " + f.Err.Error() }

// Unwrap returns the error the operation answered.
func (f *Fault) Unwrap() error { return f.Err }

// Is makes a Fault ErrDiskFault or ErrDamageFound, as it is.
func (f *Fault) Is(target error) bool {
	return target == ErrDamageFound && f.Damage || target == ErrDiskFault && !f.Damage
}

// faultHandler is the process's fault handler; nil: faults are only
// returned.
var faultHandler atomic.Pointer[func(*Fault)]

// HandleFaults has fn called with every Fault this process meets, before
// the call that met it returns it; nil removes the handler. A node's fn
// stops the process and does not return. Set it before opening stores.
func HandleFaults(fn func(*Fault)) {
	if fn == nil {
		faultHandler.Store(nil)
		return
	}
	faultHandler.Store(&fn)
}

// Report hands f to the fault handler (which may not return) and returns
// f, for the caller to return.
func Report(f *Fault) error {
	if h := faultHandler.Load(); h != nil {
		(*h)(f)
	}
	return f
}

// ReportDiskFault reports err as a disk fault when it is one (see
// DiskFault) and returns it as a *Fault; any other error is returned as
// it is. where names the file when err does not (a directory, say).
func ReportDiskFault(err error, where string) error {
	op, path, ok := DiskFault(err)
	if !ok {
		return err
	}
	var f *Fault
	if errors.As(err, &f) {
		return err // reported where it was met
	}
	if path == "" {
		path = where
	}
	cause := err
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		cause = pe.Err // the path and the operation are in the Fault
	}
	return Report(&Fault{Op: op, Path: path, Err: cause})
}

// ReportDamage reports damage found in file path of the raft group whose
// state directory is stateDir, and returns it as a *Fault.
func ReportDamage(err error, path, stateDir string) error {
	return Report(&Fault{Op: "read", Path: path, Err: err, Damage: true, Marker: filepath.Join(stateDir, DamageMarkerFile)})
}

// DiskFault says whether err is a failed write or fsync, and of what:
// an *fs.PathError of a write or sync (what os.File answers), or EIO
// from anywhere (bbolt's fdatasync answers a bare errno). A short write
// counts: the file holds part of what was asked.
func DiskFault(err error) (op, path string, ok bool) {
	if err == nil || errors.Is(err, ErrDamageFound) {
		return "", "", false
	}
	var f *Fault
	if errors.As(err, &f) {
		return f.Op, f.Path, true
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch pe.Op {
		case "write":
			return "write", pe.Path, true
		case "sync", "fsync", "fdatasync":
			return "fsync", pe.Path, true
		}
	}
	if errors.Is(err, syscall.EIO) {
		if pe != nil {
			return pe.Op, pe.Path, true
		}
		return "write or fsync", "", true
	}
	return "", "", false
}

// Dir is the store's directory: a raft group's state directory, where
// DamageMarkerFile goes.
func (s *Store) Dir() string { return s.dir }

// segmentFault is the segment files' fault handler: a damaged record
// leaves the marker in the store's directory, a failed write or fsync is
// a disk fault.
func (s *Store) segmentFault(path string, err error) {
	if errors.Is(err, segment.ErrCorrupt) {
		ReportDamage(err, path, s.dir)
		return
	}
	ReportDiskFault(err, path)
}
