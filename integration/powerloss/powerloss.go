// Package powerloss is a FUSE file system for tests that, when its power
// goes, forgets every write no fsync made durable, as a machine crash
// does with the page cache (kill -9 keeps it: the kernel still writes
// it out).
//
// It passes everything through to a backing directory and keeps, per
// file, an undo record of each write, truncation and allocation since the
// file's last fsync. PowerOff refuses every request from then on,
// unmounts, and plays the undo records back newest first, so each file is
// again exactly what its last fsync left. Directory operations (create,
// rename, unlink, link) are kept as if synced: the model is a file system
// that journals its metadata and not its data, like ext4's default
// data=ordered with delayed allocation, where an unsynced new file comes
// back empty.
package powerloss

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is one mounted file system.
type FS struct {
	mountpoint string
	server     *fuse.Server
	off        atomic.Bool // the power is off: every request fails with EIO

	mu      sync.Mutex
	pending map[inode]*pending // files written since their last fsync

	fail atomic.Pointer[failure] // nil: no injected faults
}

// Op names the file operations Fail makes fail; combine them with |.
type Op uint8

const (
	// OpWrite is write(2) (and fallocate, which grows a file).
	OpWrite Op = 1 << iota
	// OpFsync is fsync(2) and fdatasync(2).
	OpFsync
)

// failure is what Fail set.
type failure struct {
	ops   Op
	match func(path string) bool
}

// Fail has the operations ops on every file whose path, relative to the
// mount point, match says yes to answer EIO from now on, as a failing
// disk does, until Clear. A failed write changes nothing; a failed fsync
// makes nothing durable (the file's unsynced changes stay undoable by
// PowerOff), and both are refused without reaching the backing file.
// match is asked about the file's path at the time of the call (a file
// renamed since it was opened is asked about by its new name).
func (f *FS) Fail(ops Op, match func(path string) bool) {
	f.fail.Store(&failure{ops: ops, match: match})
}

// Clear ends the faults Fail set: the disk works again.
func (f *FS) Clear() { f.fail.Store(nil) }

// failing says whether op on the file of node n must answer EIO.
func (f *FS) failing(op Op, n *fs.Inode) bool {
	fl := f.fail.Load()
	return fl != nil && fl.ops&op != 0 && n != nil && fl.match(n.Path(nil))
}

// inode names a backing file whatever its path: fsync covers the inode,
// and hard links and renames keep it.
type inode struct{ dev, ino uint64 }

// pending is what a file was before its unsynced writes.
type pending struct {
	mu   sync.Mutex
	f    *os.File // our own read-write descriptor, closed once synced
	undo []undo
	// saved are the byte ranges undo already restores, sorted and
	// apart: the oldest record of a byte decides what it goes back to,
	// so a later change to a saved byte needs no record (memory stays
	// about the size of the unsynced data, not of every write-back of
	// a memory-mapped page).
	saved []span
}

// span is the byte range [from, to).
type span struct{ from, to int64 }

// unsaved lists the parts of [from, to) outside p.saved.
func (p *pending) unsaved(from, to int64) []span {
	var out []span
	for _, s := range p.saved {
		if s.to <= from {
			continue
		}
		if s.from >= to {
			break
		}
		if s.from > from {
			out = append(out, span{from, s.from})
		}
		from = max(from, s.to)
	}
	if from < to {
		out = append(out, span{from, to})
	}
	return out
}

// save adds [from, to) to p.saved, merging neighbours.
func (p *pending) save(from, to int64) {
	var out []span
	for _, s := range p.saved {
		if s.to < from || s.from > to {
			out = append(out, s)
			continue
		}
		from, to = min(from, s.from), max(to, s.to)
	}
	out = append(out, span{from, to})
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	p.saved = out
}

// undo restores a file as it was before one change: truncate it to cut
// and then to size (what lay past cut is zeros now), then write pieces.
type undo struct {
	cut, size int64
	pieces    []piece
}

// piece is bytes a file held at off.
type piece struct {
	off  int64
	data []byte
}

// Loss is what a power loss undid.
type Loss struct {
	Files, Changes int   // files rolled back, and changes undone in them
	Bytes          int64 // bytes whose writes were undone
}

// Mount serves backing at mountpoint (both existing directories). The
// caller must be root: the mount is made with mount(2), no fusermount.
func Mount(backing, mountpoint string) (*FS, error) {
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	f := &FS{mountpoint: mountpoint, pending: map[inode]*pending{}}
	top := &node{LoopbackNode: root.(*fs.LoopbackNode), fs: f}
	server, err := fs.Mount(mountpoint, top, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true, FsName: "powerloss:" + backing, Name: "powerloss", AllowOther: true,
	}})
	if err != nil {
		return nil, fmt.Errorf("powerloss: mount %s: %w", mountpoint, err)
	}
	f.server = server
	return f, nil
}

// Cut cuts the power: every request fails from now on. Kill the
// processes using the file system next, then call PowerOff.
func (f *FS) Cut() { f.off.Store(true) }

// PowerOff cuts the power if Cut has not, unmounts the file system, and
// rolls each file back to what its last fsync left.
func (f *FS) PowerOff() (Loss, error) {
	f.Cut()
	if err := f.unmount(); err != nil {
		return Loss{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var loss Loss
	var errs []error
	for id, p := range f.pending {
		p.mu.Lock() // a change that began before the cut has ended
		loss.Files++
		for i := len(p.undo) - 1; i >= 0; i-- {
			u := p.undo[i]
			loss.Changes++
			errs = append(errs, p.f.Truncate(u.cut), p.f.Truncate(u.size))
			for _, pc := range u.pieces {
				loss.Bytes += int64(len(pc.data))
				_, err := p.f.WriteAt(pc.data, pc.off)
				errs = append(errs, err)
			}
		}
		errs = append(errs, p.f.Close())
		p.mu.Unlock()
		delete(f.pending, id)
	}
	return loss, errors.Join(errs...)
}

// Unmount unmounts with the power on: nothing is rolled back.
func (f *FS) Unmount() error {
	err := f.unmount()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, p := range f.pending {
		p.f.Close()
		delete(f.pending, id)
	}
	return err
}

func (f *FS) unmount() error {
	if err := f.server.Unmount(); err != nil {
		// Still busy (a process holds a file open): detach it; the
		// kernel finishes once the last file closes.
		if err := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("powerloss: unmount %s: %w", f.mountpoint, err)
		}
	}
	return nil
}

// change says what a change to a file does, for its undo record: it
// writes [from, to), or it sets the size to newSize (when resize).
type change struct {
	from, to int64
	resize   bool
	newSize  int64
	grow     bool // the size only grows (fallocate)
}

// record saves, before run makes change c to fd's file, what the file
// held where c changes it and had not been saved since the last fsync,
// then runs it.
func (f *FS) record(fd int, c change, run func() syscall.Errno) syscall.Errno {
	if f.off.Load() {
		return syscall.EIO
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	p, errno := f.pendingFor(fd, &st)
	if errno != 0 {
		return errno
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := syscall.Fstat(fd, &st); err != nil { // again, under the file's lock
		return fs.ToErrno(err)
	}
	if c.grow {
		c.newSize = max(c.newSize, st.Size)
	}
	if c.resize {
		// A truncation loses what lay past the new size; an extension
		// changes only the size.
		c.from, c.to = min(c.newSize, st.Size), math.MaxInt64
	}
	var undos []undo
	for _, gap := range p.unsaved(c.from, c.to) {
		u := undo{cut: st.Size, size: st.Size}
		var err error
		if c.resize {
			u.cut = gap.from
			u.pieces, err = dataIn(p.f, gap.from, st.Size)
		} else if end := min(gap.to, st.Size); end > gap.from {
			old := make([]byte, end-gap.from)
			_, err = p.f.ReadAt(old, gap.from)
			u.pieces = []piece{{gap.from, old}}
		}
		if err != nil {
			return fs.ToErrno(err)
		}
		undos = append(undos, u)
	}
	if errno := run(); errno != 0 {
		return errno
	}
	if len(undos) > 0 {
		p.undo = append(p.undo, undos...)
		p.save(c.from, c.to)
	}
	return 0
}

// dataIn reads the parts of [from, to) of f that are not zeros, skipping
// holes (badger sizes its files far past their data).
func dataIn(f *os.File, from, to int64) ([]piece, error) {
	const chunk = 1 << 20
	var out []piece
	fd := int(f.Fd())
	for from < to {
		data, err := unix.Seek(fd, from, unix.SEEK_DATA)
		if err != nil || data >= to {
			break // ENXIO: no data past from
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		for at := data; at < min(hole, to); at += chunk {
			b := make([]byte, min(chunk, min(hole, to)-at))
			if _, err := f.ReadAt(b, at); err != nil {
				return nil, err
			}
			if slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
				out = append(out, piece{at, b})
			}
		}
		from = hole
	}
	return out, nil
}

// pendingFor returns the undo log of fd's file, opening a read-write
// descriptor of its own for it on the first change since a sync.
func (f *FS) pendingFor(fd int, st *syscall.Stat_t) (*pending, syscall.Errno) {
	id := inode{dev: st.Dev, ino: st.Ino}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.pending[id]; p != nil {
		return p, 0
	}
	own, err := os.OpenFile(filepath.Join("/proc/self/fd", fmt.Sprint(fd)), os.O_RDWR, 0)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	p := &pending{f: own}
	f.pending[id] = p
	return p, 0
}

// forget runs sync, an fsync of fd's file, and then drops the undo
// records made before it began: those changes are durable now.
func (f *FS) forget(fd int, sync func() syscall.Errno) syscall.Errno {
	if f.off.Load() {
		return syscall.EIO
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	id := inode{dev: st.Dev, ino: st.Ino}
	f.mu.Lock()
	p := f.pending[id]
	f.mu.Unlock()
	n := 0
	if p != nil {
		p.mu.Lock()
		n = len(p.undo)
		p.mu.Unlock()
	}
	if errno := sync(); errno != 0 {
		return errno
	}
	if p == nil || n == 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Changes that ran beside the fsync stay undoable.
	p.undo = append(p.undo[:0:0], p.undo[n:]...)
	p.saved = nil
	for _, u := range p.undo {
		for _, pc := range u.pieces {
			p.save(pc.off, pc.off+int64(len(pc.data))) // what a record kept restores; more records are never wrong
		}
	}
	if len(p.undo) == 0 && f.pending[id] == p {
		delete(f.pending, id)
		p.f.Close()
	}
	return 0
}

// node is a loopback node whose files keep undo records.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeWrapChilder = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
)

// WrapChild makes every node below the root one of ours.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.off.Load() {
		return nil, 0, syscall.EIO
	}
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.wrap(fh, n.EmbeddedInode()), fuseFlags, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.fs.off.Load() {
		return nil, nil, 0, syscall.EIO
	}
	in, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, n.wrap(fh, in), fuseFlags, 0
}

// wrap makes fh, a file handle of in, one of ours.
func (n *node) wrap(fh fs.FileHandle, in *fs.Inode) fs.FileHandle {
	lf := fh.(*fs.LoopbackFile)
	fd, _ := lf.PassthroughFd()
	return &file{lf: lf, fd: fd, fs: n.fs, in: in}
}

// Setattr without an open file (truncate(2) by path) opens one to record
// the truncation.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.fs.off.Load() {
		return syscall.EIO
	}
	if f, ok := fh.(*file); ok {
		return f.Setattr(ctx, in, out)
	}
	if _, ok := in.GetSize(); ok {
		g, err := os.OpenFile(filepath.Join(n.RootData.Path, n.Path(nil)), os.O_RDWR, 0)
		if err != nil {
			return fs.ToErrno(err)
		}
		defer g.Close()
		f := &file{lf: fs.NewLoopbackFileFromOS(g), fd: int(g.Fd()), fs: n.fs, in: n.EmbeddedInode()}
		return f.Setattr(ctx, in, out)
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.fs.off.Load() {
		return syscall.EIO
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.fs.off.Load() {
		return syscall.EIO
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fs.off.Load() {
		return nil, syscall.EIO
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

// file is an open file whose changes are recorded before they are made.
type file struct {
	lf *fs.LoopbackFile
	fd int
	fs *FS
	in *fs.Inode // the file's node, for its path (see Fail)
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
)

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if f.fs.off.Load() {
		return nil, syscall.EIO
	}
	return f.lf.Read(ctx, buf, off)
}

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if f.fs.failing(OpWrite, f.in) {
		return 0, syscall.EIO
	}
	var n uint32
	errno := f.fs.record(f.fd, change{from: off, to: off + int64(len(data))}, func() syscall.Errno {
		var errno syscall.Errno
		n, errno = f.lf.Write(ctx, data, off)
		return errno
	})
	return n, errno
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if f.fs.failing(OpFsync, f.in) {
		return syscall.EIO
	}
	return f.fs.forget(f.fd, func() syscall.Errno { return f.lf.Fsync(ctx, flags) })
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	if f.fs.off.Load() {
		return syscall.EIO
	}
	return f.lf.Flush(ctx)
}

func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if f.fs.off.Load() {
		return syscall.EIO
	}
	return f.lf.Getattr(ctx, out)
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	size, ok := in.GetSize()
	if !ok {
		if f.fs.off.Load() {
			return syscall.EIO
		}
		return f.lf.Setattr(ctx, in, out)
	}
	return f.fs.record(f.fd, change{resize: true, newSize: int64(size)}, func() syscall.Errno { return f.lf.Setattr(ctx, in, out) })
}

// Allocate allocates without changing data (mode 0 may grow the file,
// which the undo record of an extension covers); modes that punch or
// zero ranges are refused, and callers fall back.
func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if f.fs.failing(OpWrite, f.in) {
		return syscall.EIO
	}
	switch mode {
	case 0:
		return f.fs.record(f.fd, change{resize: true, newSize: int64(off + size), grow: true}, func() syscall.Errno { return f.lf.Allocate(ctx, off, size, mode) })
	case unix.FALLOC_FL_KEEP_SIZE:
		if f.fs.off.Load() {
			return syscall.EIO
		}
		return f.lf.Allocate(ctx, off, size, mode)
	}
	return syscall.EOPNOTSUPP
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}
