// Package node runs one waggle node: what `waggle serve` starts, without
// its flags, so that a test can start a node in-process (on port 0, in a
// temporary directory) and stop it again.
//
// It owns:
//
//   - start-up, in order: the data directory's free space and raft group
//     count, each group's start-up check (a damaged directory is moved
//     aside and repaired from the peers), the store, the raft listener,
//     raft and the other raft groups, the broker services, the HTTP API
//     and the Kafka listener;
//   - shutdown, in the reverse order: leadership handed over, the
//     listeners stopped, the cluster loops ended and waited for, then the
//     raft groups, raft, the raft listener and the store closed, so the
//     data directory is free once Close returns;
//   - the cluster loops: registering the node's advertised addresses
//     (registerSelf, again on each election it wins), raising the log
//     format once every member reads it (raiseLogFormats), checking that
//     the members run as many raft groups (watchGroupCount, stopping an
//     odd node), watching the disk (watchFreeSpace: writes refused while
//     it is full, a hand-off to a voter with room, a stop when nearly
//     full or gone), the raft groups' maintenance and balancing, and the
//     metrics read at scrape time (observe);
//   - the bridges that make raft and badger log through the node's slog
//     logger (logbridge.go).
//
// It never does: wire formats (broker/httpapi, kafka, command), flag
// parsing, the environment or the process's settings (cmd/waggle: serve
// checks its flags, builds the logger, sets the memory limit and turns the
// flags into a Config), or apply logic (fsm, store, broker). Lower
// packages never import it.
package node
