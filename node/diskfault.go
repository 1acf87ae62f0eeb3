package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/waggle-mq/waggle/store"
)

// A write or fsync of durable state that fails, or a record read back
// whose checksum does not match, stops the node at once (store.Fault):
// after a failed fsync nobody knows what the disk holds, so nothing more
// may be acknowledged, and a retried fsync would "succeed" over pages the
// kernel already dropped; a damaged record must not be served. The process
// exits as a crash would (no hand-off, no flush: either could write more
// to the failing disk, or answer from the damage), the other voters go on,
// and a restart catches up from them as after kill -9. Damage also leaves
// store.DamageMarkerFile, so the next start repairs the raft group from
// the peers even where the start-up check, which reads less than a
// running node, would pass.

// FaultExitCode is the exit status of a node stopped by a disk fault or by
// damage it found while running.
const FaultExitCode = 3

// faultStop turns store.Faults into a stop: one log line saying what
// failed where, the damage marker when the fault is damage, and exit
// (os.Exit in a node). Only the first fault is handled: every other caller
// waits for the exit, so the log has one line and nothing goes on.
func faultStop(log *slog.Logger, exit func(code int)) func(*store.Fault) {
	var once sync.Mutex
	return func(f *store.Fault) {
		once.Lock() // never unlocked: the process ends
		if !f.Damage {
			log.Error(fmt.Sprintf("disk fault: %v; stopping (nothing more is acknowledged from this disk; "+
				"restart the node once the disk is sound: it catches up from its peers)", f))
			exit(FaultExitCode)
			return
		}
		repair := "the next start repairs this node from its peers"
		if err := writeDamageMarker(f); err != nil {
			repair = fmt.Sprintf("the marker that has the next start repair it could not be written (%v): move the data directory aside and start the node again", err)
		}
		log.Error(fmt.Sprintf("damage found: %v; stopping without serving it (%s)", f, repair))
		exit(FaultExitCode)
	}
}

// writeDamageMarker leaves f's marker, saying what was found, durably.
func writeDamageMarker(f *store.Fault) error {
	body := fmt.Sprintf("%s: %v\n", time.Now().UTC().Format(time.RFC3339), f)
	m, err := os.OpenFile(f.Marker, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = m.WriteString(body)
	err = errors.Join(err, m.Sync(), m.Close())
	if err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(f.Marker))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// damageFound reads the marker a running node left in the raft group
// directory dir when it found damage: what it found, and whether it did.
func damageFound(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "state", store.DamageMarkerFile))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
