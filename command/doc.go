// Package command defines what goes into waggle's raft log: the command
// types the leader proposes, their binary codec (and the JSON layouts of
// log format 1), the log formats a rolling upgrade steps through, the seal
// (a checksum) around every entry, the answer each command declares, and
// the bounds an entry keeps to.
//
// It is a leaf the frontends import to build commands and read answers:
// it uses the store's record types but never reads or writes a store,
// applies nothing and knows no raft. A type byte starts every entry;
// types are only appended, never renumbered, and old layouts stay
// decodable for ever (logformat.go says how a layout changes). The golden
// corpus of every format's entries is in fsm/testdata/corpus, where the
// state machine checks what each one does.
package command
