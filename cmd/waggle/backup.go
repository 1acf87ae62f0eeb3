package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/waggle-mq/waggle/broker/httpapi"
	"github.com/waggle-mq/waggle/client"
	"github.com/waggle-mq/waggle/fsm"
	"github.com/waggle-mq/waggle/raftgroups"
	"github.com/waggle-mq/waggle/raftnode"
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
			h, n, groups, err := downloadBackup(o, out, -1)
			if api := (*client.Error)(nil); errors.As(err, &api) && api.Code == "several_groups" && groups > 1 {
				// One file per raft group: FILE holds group 0.
				for g := range groups {
					file := groupBackupFile(out, g, groups)
					if h, n, _, err = downloadBackup(o, file, g); err != nil {
						return fmt.Errorf("raft group %d: %w", g, err)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "backup of raft group %d at index %d (term %d) written to %s: %d bytes\n", g, h.Index, h.Term, file, n)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d raft groups backed up in %v\n", groups, time.Since(start).Round(time.Millisecond))
				return nil
			}
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

// groupBackupFile is where raft group g's backup of a cluster of groups
// goes: out itself for group 0, out.group<g>-of-<groups> for the others.
func groupBackupFile(out string, g, groups int) string {
	if g == 0 {
		return out
	}
	return fmt.Sprintf("%s.group%d-of-%d", out, g, groups)
}

// downloadBackup streams the backup of raft group (-1: the cluster's only
// one) into out.tmp, verifying it on the way, fsyncs it and renames it to
// out. It also answers how many raft groups the cluster runs.
func downloadBackup(o *clientOptions, out string, group int) (h fsm.BackupHeader, n int64, groups int, err error) {
	c := o.client()
	// A backup takes as long as the data takes to stream: no overall
	// timeout (the admin client's would cut it off).
	c.HTTP.Timeout = 0
	path := "/api/v1/cluster/backup"
	if group >= 0 {
		path += "?group=" + strconv.Itoa(group)
	}
	req, err := c.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		return h, 0, 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return h, 0, 0, err
	}
	defer resp.Body.Close()
	groups, _ = strconv.Atoi(resp.Header.Get(httpapi.GroupsHeader))
	if resp.StatusCode != http.StatusOK {
		return h, 0, groups, c.ReadError(resp, path)
	}
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return h, 0, 0, fmt.Errorf("%w (a backup still running, or left by one that failed: remove it)", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	v := fsm.NewBackupVerifier()
	n, err = io.Copy(io.MultiWriter(f, v), resp.Body)
	if err != nil {
		return h, n, 0, fmt.Errorf("backup broke off after %d bytes: %w", n, err)
	}
	if h, err = v.Check(); err != nil {
		return h, n, 0, fmt.Errorf("the node sent a bad backup: %w", err)
	}
	if err := f.Sync(); err != nil {
		return h, n, 0, err
	}
	if err := f.Close(); err != nil {
		return h, n, 0, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return h, n, 0, err
	}
	ok = true
	return h, n, groups, syncParent(out)
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
	// The restored node's client listeners, named in the command that
	// starts it (restore itself opens none).
	httpAddr, kafkaAddr string
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
	f.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:6632", "HTTP address the restored node will listen on (for the serve command printed)")
	f.StringVar(&o.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka address the restored node will listen on (for the serve command printed)")
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
	groups, err := backupGroups(o.in)
	if err != nil {
		return err
	}
	// Every file is read and checked before anything is created.
	files := make([]checkedBackup, groups)
	for g := range groups {
		if files[g], err = openBackup(groupBackupFile(o.in, g, groups)); err != nil {
			return err
		}
		defer files[g].f.Close()
	}
	// Checked before anything is created: a failed restore cleans out the
	// directory (cleanRestoreTarget), which must never hold anything else.
	if err := raftnode.RequireEmptyDir(o.dataDir); err != nil {
		return fmt.Errorf("refusing to restore into %s: %w", o.dataDir, err)
	}
	self := raftnode.Peer{ID: strconv.FormatUint(uint64(o.nodeID), 10), Addr: orDefault(o.advertiseRaft, o.raftAddr)}
	created, err := createDir(o.dataDir)
	if err != nil {
		return err
	}
	for g, b := range files {
		err := raftnode.RestoreBackup(raftgroups.Dir(o.dataDir, uint32(g)), b.body, b.h, self)
		if err == nil && g == 0 && groups > 1 {
			err = raftgroups.Record(o.dataDir, groups)
		}
		if err != nil {
			// Leave the directory as it was found: missing or empty.
			cleanRestoreTarget(o.dataDir, created)
			return fmt.Errorf("restore of raft group %d into %s failed (it was emptied again): %w", g, o.dataDir, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "restored raft index %d (term %d, backup taken %s) from %s\n",
			b.h.Index, b.h.Term, b.h.Created.UTC().Format(time.RFC3339), b.name)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "restored into %s as node %s (raft %s) in %v\n", o.dataDir, self.ID, self.Addr, time.Since(start).Round(time.Millisecond))
	hint := fmt.Sprintf("waggle serve --data-dir %s --node-id %s --raft-addr %s --http-addr %s --kafka-addr %s",
		o.dataDir, self.ID, o.raftAddr, o.httpAddr, o.kafkaAddr)
	if o.advertiseRaft != "" {
		hint += " --advertise-raft " + o.advertiseRaft
	}
	if groups > 1 {
		hint += fmt.Sprintf(" --data-groups %d", groups)
	}
	fmt.Fprintln(cmd.OutOrStdout(), "start it with:", hint)
	return nil
}

// backupGroups is how many raft groups the backup in FILE covers: 1, or N
// when waggle backup wrote FILE.group1-of-N … beside it (all of them
// must be there).
func backupGroups(in string) (int, error) {
	matches, err := filepath.Glob(in + ".group1-of-*")
	if err != nil || len(matches) == 0 {
		return 1, err
	}
	if len(matches) > 1 {
		return 0, fmt.Errorf("more than one set of group files beside %s: %v", in, matches)
	}
	groups, err := strconv.Atoi(strings.TrimPrefix(matches[0], in+".group1-of-"))
	if err != nil || groups < 2 {
		return 0, fmt.Errorf("%s: not a file waggle backup writes", matches[0])
	}
	for g := 2; g < groups; g++ {
		if _, err := os.Stat(groupBackupFile(in, g, groups)); err != nil {
			return 0, fmt.Errorf("the backup of %d raft groups lacks group %d's file: %w", groups, g, err)
		}
	}
	return groups, nil
}

// checkedBackup is a backup file whose checksums and trailer passed.
type checkedBackup struct {
	name string
	f    *os.File
	h    fsm.BackupHeader
	body io.Reader
}

// openBackup reads a backup file whole to check it, then opens its body.
func openBackup(name string) (checkedBackup, error) {
	b := checkedBackup{name: name}
	f, err := os.Open(name)
	if err != nil {
		return b, err
	}
	fi, err := f.Stat()
	if err == nil {
		v := fsm.NewBackupVerifier()
		if _, err = io.Copy(v, f); err != nil {
			err = fmt.Errorf("read %s: %w", name, err)
		} else if b.h, err = v.Check(); err != nil {
			err = fmt.Errorf("refusing to restore %s: %w", name, err)
		}
	}
	if err == nil {
		b.body, err = fsm.BackupBody(f, fi.Size())
	}
	if err != nil {
		f.Close()
		return b, err
	}
	b.f = f
	return b, nil
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

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
