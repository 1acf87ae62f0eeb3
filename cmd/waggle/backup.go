package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/raftfsm"
)

// newBackupCmd downloads a backup file from a running node (GET
// /api/v1/cluster/backup), checking it as it arrives: the file appears
// under its name only whole and verified.
func newBackupCmd(o *clientOptions) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write a consistent backup of a running node's state to FILE (writes go on meanwhile)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out FILE is required")
			}
			start := time.Now()
			h, n, err := downloadBackup(o, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup of raft index %d (term %d) written to %s: %d bytes in %v\n",
				h.Index, h.Term, out, n, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write (through FILE.tmp, renamed once complete and verified)")
	return cmd
}

// downloadBackup streams the backup into out.tmp, verifying it on the way,
// fsyncs it and renames it to out.
func downloadBackup(o *clientOptions, out string) (raftfsm.BackupHeader, int64, error) {
	var h raftfsm.BackupHeader
	c := o.client()
	// A backup takes as long as the data takes to stream: no overall
	// timeout (the admin client's would cut it off).
	c.http.Timeout = 0
	req, err := http.NewRequest(http.MethodGet, c.base+"/api/v1/cluster/backup", nil)
	if err != nil {
		return h, 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			return h, 0, fmt.Errorf("cannot reach waggle at %s (is it running? set --server or WAGGLE_SERVER): %v", c.base, uerr.Err)
		}
		return h, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error, Code string }
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		return h, 0, &apiError{Status: resp.StatusCode, Code: e.Code, Msg: e.Error}
	}
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return h, 0, fmt.Errorf("%w (a backup still running, or left by one that failed: remove it)", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	v := raftfsm.NewBackupVerifier()
	n, err := io.Copy(io.MultiWriter(f, v), resp.Body)
	if err != nil {
		return h, n, fmt.Errorf("backup broke off after %d bytes: %w", n, err)
	}
	if h, err = v.Check(); err != nil {
		return h, n, fmt.Errorf("the node sent a bad backup: %w", err)
	}
	if err := f.Sync(); err != nil {
		return h, n, err
	}
	if err := f.Close(); err != nil {
		return h, n, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return h, n, err
	}
	ok = true
	return h, n, syncParent(out)
}

// syncParent fsyncs the directory holding path, so a rename into it is
// durable.
func syncParent(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type restoreOptions struct {
	in            string
	dataDir       string
	nodeID        uint32
	raftAddr      string
	advertiseRaft string
}

// newRestoreCmd builds a new data directory from a backup file, offline:
// a single node, or the first node of a new cluster (add the others with
// --join and POST /api/v1/cluster/nodes).
func newRestoreCmd() *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore --in FILE --data-dir DIR",
		Short: "Build a new node's data directory from a backup file (offline; DIR must be new or empty)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return restore(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.in, "in", "", "backup file written by waggle backup")
	f.StringVar(&o.dataDir, "data-dir", "", "data directory to create (must not exist, or be empty)")
	// The same defaults as serve's: the restored node is this raft member.
	f.Uint32Var(&o.nodeID, "node-id", 1, "id of the restored node (the cluster's only voter)")
	f.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7400", "raft address the restored node will listen on")
	f.StringVar(&o.advertiseRaft, "advertise-raft", "", "raft address peers dial (default: --raft-addr)")
	return cmd
}

func restore(cmd *cobra.Command, o restoreOptions) error {
	if o.in == "" || o.dataDir == "" {
		return errors.New("--in FILE and --data-dir DIR are required")
	}
	if o.nodeID == 0 {
		return errors.New("--node-id must be a positive number")
	}
	start := time.Now()
	f, err := os.Open(o.in)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	v := raftfsm.NewBackupVerifier()
	if _, err := io.Copy(v, f); err != nil {
		return fmt.Errorf("read %s: %w", o.in, err)
	}
	h, err := v.Check()
	if err != nil {
		return fmt.Errorf("refusing to restore %s: %w", o.in, err)
	}
	// Checked before anything is created: a failed restore cleans out the
	// directory (cleanRestoreTarget), which must never hold anything else.
	if err := raftfsm.RequireEmptyDir(o.dataDir); err != nil {
		return fmt.Errorf("refusing to restore into %s: %w", o.dataDir, err)
	}
	body, err := raftfsm.BackupBody(f, fi.Size())
	if err != nil {
		return err
	}
	self := raftfsm.Peer{ID: strconv.FormatUint(uint64(o.nodeID), 10), Addr: orDefault(o.advertiseRaft, o.raftAddr)}
	created, err := createDir(o.dataDir)
	if err != nil {
		return err
	}
	if err := raftfsm.RestoreBackup(o.dataDir, body, h, self); err != nil {
		// Leave the directory as it was found: missing or empty.
		cleanRestoreTarget(o.dataDir, created)
		return fmt.Errorf("restore into %s failed (it was emptied again): %w", o.dataDir, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "restored raft index %d (term %d, backup taken %s) into %s as node %s (raft %s) in %v\n",
		h.Index, h.Term, h.Created.UTC().Format(time.RFC3339), o.dataDir, self.ID, self.Addr, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(cmd.OutOrStdout(), "start it with: waggle serve --data-dir %s --node-id %s --raft-addr %s\n", o.dataDir, self.ID, o.raftAddr)
	return nil
}

// createDir creates dir if missing and reports whether it did.
func createDir(dir string) (bool, error) {
	if _, err := os.Stat(dir); err == nil {
		return false, nil
	}
	return true, os.MkdirAll(dir, 0o755)
}

// cleanRestoreTarget undoes a failed restore: dir goes if the restore
// created it, else what the restore put in it does (it was empty).
func cleanRestoreTarget(dir string, created bool) {
	if created {
		os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
