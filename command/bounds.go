package command

// Bounded work. Every raft entry writes at most MaxEntryWrites keys,
// whatever the size of the state: a command whose natural effect grows
// with the data (deleting a queue with 60,000 partitions, seeking a
// group over all of them) writes a bounded record instead (a tombstone, a
// reset) and the rest happens in bounded cleanup entries or lazily when a
// position is next read. A replica applies every entry in one badger
// transaction it cannot split (a partial entry would be applied twice
// after a restart), so an unbounded entry would fail on every replica, on
// every restart, for ever.
//
// The bound of each command, with the limits the broker enforces before
// proposing it:
//
//	push, transaction  3 per message (message, dedup record, expiry index)
//	                   + 3 per partition (≤ MaxPushTargets) + 2 per new queue,
//	                   3 per ack, 3 per KV op or timer (≤ 1,000 each)
//	ack                3 per ack (≤ 10,000)
//	produce            1 per batch + 1 per producer + a new topic's partitions
//	create/add topic   2 per partition (≤ 10,000 partitions)
//	pop                2 per partition looked at (≤ maxPopScan: a settled
//	                   lease's cursor and lease key, or a position worked out
//	                   from a reset) + 4
//	seek, delete group, delete queue   ≤ 4
//	commit offsets     1 per offset (≤ MaxOffsetsPerEntry)
//	delete records     1 per partition (≤ MaxOffsetsPerEntry; more is refused)
//	alter topic, set log format   1
//	compact            ≤ compactMaxWrites (20,000) + a few: one per key
//	                   indexed, per tombstone marked or dropped, per entry
//	                   moved or dropped, plus the state and a sealed segment
//	prune, tick        2 per record pruned, timers fired as a push (≤ 1,000
//	                   and 2 MiB)
//	dead letters       ≤ 2 MiB copied per entry (maxDeadLetterBytes)
//	cleanup            ≤ MaxCleanupWrites + 1 (a tombstone's own write counts)
//	keyed              its inner command's + 2 (the outcome and its expiry
//	                   index entry); prune requests 2 per outcome pruned
//
// fsm.FSM.ApplyBatch commits its open transaction before an entry once it
// holds commitAfterWrites writes, so one badger transaction stays below
// commitAfterWrites + MaxEntryWrites = 70,000 writes; badger's own limit
// with the default options is 104,857.
const MaxEntryWrites = 40_000

// MaxPushTargets bounds the distinct (queue, partition) pairs one push or
// transaction writes to; items past it are refused.
const MaxPushTargets = 1_000

// MaxOffsetsPerEntry bounds the offsets of one commit, delete or delete
// records entry; the broker splits larger Kafka requests.
const MaxOffsetsPerEntry = 10_000

// MaxCleanupWrites bounds the keys one cleanup entry deletes, and
// cleanupMaxScanned the keys it looks at.
const (
	MaxCleanupWrites  = 10_000
	CleanupMaxScanned = 50_000
)
