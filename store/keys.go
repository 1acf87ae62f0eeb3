package store

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Key layout. Every key starts with one family byte; integers are big-endian
// so badger's byte order is numeric order. Family bytes are only ever
// appended, never renumbered: a renumbered family would strand data written
// by an older binary.
//
//	familyMeta      [0x01]                                  -> meta record (applied index, clock, id counter)
//	familyQueue     [0x02] name                             -> queue record (JSON, versioned)
//	familyPartition [0x03] queueID(8) name                  -> partition id (8)
//	familyPartMeta  [0x04] partitionID(8)                   -> partition record (versioned)
//	familyMessage   [0x05] partitionID(8) offset(8)         -> message record (versioned)
//	(0x06–0x08 are written below log format 4 only; from 4 ids go to the
//	dedup logs, see dedupstream.go)
//	familyDedup     [0x06] partitionID(8) transactionID     -> dedup record (versioned)
//	familyDedupLong [0x08] partitionID(8) sha256(transactionID) -> dedup record + transactionID
//	familyExpiry    [0x07] expiresAtMs(8) dedupKey          -> empty
//	                [0x07] expiresAtMs(8) [0x01] partitionID(8) offset(8) count(4)
//	                                                        -> count × (uvarint(len) transactionID)
//	familyNode      [0x09] nodeID                           -> node record (JSON, versioned)
//	familyProducer  [0x0A] producerID(8) partitionID(8)     -> Kafka producer state (versioned)
//	familyCursor    [0x0B] len(group)(2) group queueID(8) partitionName -> group cursor (JSON, versioned)
//	familyLease     [0x0C] leaseID                          -> the cursor key holding the lease
//	familySubscr    [0x0D] len(group)(2) group queueID(8)   -> subscription (JSON, versioned)
//	familyDeadLetter [0x0E] id(8)                           -> dead letter (JSON, versioned)
//	familyQueueByID [0x0F] queueID(8)                       -> queue name
//	0x10–0x13: the KV store and timers, see kv.go
//	familyTombstone [0x14] seq(8)                           -> tombstone (JSON, versioned)
//	familyGroup     [0x15] len(group)(2) group              -> group record (JSON, versioned)
//	0x16–0x17: segment streams, see data.go
//	0x18–0x1D: Kafka transactions, see txn.go
//	0x30–0x32: log compaction, see compact.go
//	0x33: the chosen leaders of raft groups, see leaders.go
//	0x34: classic Kafka consumer groups' membership, see classicgroups.go
//
// Badger keys are at most 65,000 bytes and a transactionId may be 65,535,
// so ids longer than maxRawIDKey are keyed by their SHA-256 in their own
// family (no raw id can look like a hash key), with the full id kept in the
// value to check on lookup.
//
// The expiry family is ordered by time first, so pruning dedup entries whose
// window has passed is a prefix scan from the start, in the same order on
// every replica. It embeds the whole dedup key it expires.
const (
	familyMeta       byte = 0x01
	familyQueue      byte = 0x02
	familyPartition  byte = 0x03
	familyPartMeta   byte = 0x04
	familyMessage    byte = 0x05
	familyDedup      byte = 0x06
	familyExpiry     byte = 0x07
	familyDedupLong  byte = 0x08
	familyNode       byte = 0x09
	familyProducer   byte = 0x0A
	familyCursor     byte = 0x0B
	familyLease      byte = 0x0C
	familySubscr     byte = 0x0D
	familyDeadLetter byte = 0x0E
	familyQueueByID  byte = 0x0F
	familyTombstone  byte = 0x14
	familyGroup      byte = 0x15
)

// maxRawIDKey is the longest transactionId used as-is in a dedup key.
const maxRawIDKey = 1024

// errBadKey reports a key that does not parse as its family says.
var errBadKey = errors.New("store: malformed key")

func metaKey() []byte { return []byte{familyMeta} }

// logFormatKey sorts right after metaKey (see Meta.LogFormat).
func logFormatKey() []byte { return []byte{familyMeta, 'f'} }

func queueKey(name string) []byte {
	return append([]byte{familyQueue}, name...)
}

func queuePrefix() []byte { return []byte{familyQueue} }

func nodeKey(id string) []byte { return append([]byte{familyNode}, id...) }

func nodePrefix() []byte { return []byte{familyNode} }

func cursorPrefix(group string) []byte {
	k := make([]byte, 0, 3+len(group))
	k = append(k, familyCursor)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

func cursorKey(group string, queueID uint64, partition string) []byte {
	k := binary.BigEndian.AppendUint64(cursorPrefix(group), queueID)
	return append(k, partition...)
}

func subscriptionPrefix(group string) []byte {
	k := make([]byte, 0, 3+len(group))
	k = append(k, familySubscr)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

// groupPrefix returns the part of a cursor or subscription key that names
// its group (family, length, name) and the name.
func groupPrefix(k []byte) (prefix []byte, group string, err error) {
	if len(k) < 3 || len(k) < 3+int(binary.BigEndian.Uint16(k[1:])) {
		return nil, "", errBadKey
	}
	prefix = k[:3+int(binary.BigEndian.Uint16(k[1:]))]
	return prefix, string(prefix[3:]), nil
}

func parseSubscriptionKey(k []byte) (group string, queueID uint64, err error) {
	if len(k) < 3 || k[0] != familySubscr {
		return "", 0, errBadKey
	}
	n := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) != 3+n+8 {
		return "", 0, errBadKey
	}
	return string(k[3 : 3+n]), binary.BigEndian.Uint64(k[3+n:]), nil
}

func tombstoneKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyTombstone}, seq)
}

func groupKey(group string) []byte {
	k := make([]byte, 0, 3+len(group))
	k = append(k, familyGroup)
	k = binary.BigEndian.AppendUint16(k, uint16(len(group)))
	return append(k, group...)
}

func leaseKey(id string) []byte { return append([]byte{familyLease}, id...) }

func subscriptionKey(group string, queueID uint64) []byte {
	return binary.BigEndian.AppendUint64(subscriptionPrefix(group), queueID)
}

func deadLetterKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyDeadLetter}, id)
}

func queueByIDKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyQueueByID}, id)
}

func parseCursorKey(k []byte) (group string, queueID uint64, partition string, err error) {
	if len(k) < 3 || k[0] != familyCursor {
		return "", 0, "", errBadKey
	}
	n := int(binary.BigEndian.Uint16(k[1:]))
	if len(k) < 3+n+8 {
		return "", 0, "", errBadKey
	}
	return string(k[3 : 3+n]), binary.BigEndian.Uint64(k[3+n:]), string(k[3+n+8:]), nil
}

func producerKey(producerID int64, partitionID uint64) []byte {
	k := binary.BigEndian.AppendUint64([]byte{familyProducer}, uint64(producerID))
	return binary.BigEndian.AppendUint64(k, partitionID)
}

func partitionKey(queueID uint64, name string) []byte {
	k := make([]byte, 0, 9+len(name))
	k = append(k, familyPartition)
	k = binary.BigEndian.AppendUint64(k, queueID)
	return append(k, name...)
}

func partitionPrefix(queueID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyPartition}, queueID)
}

func parsePartitionKey(k []byte) (queueID uint64, name string, err error) {
	if len(k) < 9 || k[0] != familyPartition {
		return 0, "", errBadKey
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), nil
}

func partMetaKey(partitionID uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{familyPartMeta}, partitionID)
}

func messageKey(partitionID, offset uint64) []byte {
	k := make([]byte, 0, 17)
	k = append(k, familyMessage)
	k = binary.BigEndian.AppendUint64(k, partitionID)
	return binary.BigEndian.AppendUint64(k, offset)
}

func parseMessageKey(k []byte) (partitionID, offset uint64, err error) {
	if len(k) != 17 || k[0] != familyMessage {
		return 0, 0, errBadKey
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:17]), nil
}

// dedupKey returns the key of a transactionId's dedup record and whether it
// is the hashed (long id) form.
func dedupKey(partitionID uint64, txID string) (key []byte, hashed bool) {
	if len(txID) > maxRawIDKey {
		sum := sha256.Sum256([]byte(txID))
		k := binary.BigEndian.AppendUint64([]byte{familyDedupLong}, partitionID)
		return append(k, sum[:]...), true
	}
	k := make([]byte, 0, 9+len(txID))
	k = append(k, familyDedup)
	k = binary.BigEndian.AppendUint64(k, partitionID)
	return append(k, txID...), false
}

func expiryKey(expiresAtMs int64, dedupKey []byte) []byte {
	k := make([]byte, 0, 9+len(dedupKey))
	k = append(k, familyExpiry)
	k = binary.BigEndian.AppendUint64(k, uint64(expiresAtMs))
	return append(k, dedupKey...)
}

// expiryGroup marks an expiry index entry that files the dedup records of
// one push entry's messages in one partition (log format 3) instead of
// one record: its key names where the first of them was stored and how
// many there are, its value their transactionIds.
const expiryGroup = 0x01

func expiryGroupKey(expiresAtMs int64, partitionID, offset uint64, count uint32) []byte {
	k := make([]byte, 0, 30)
	k = append(k, familyExpiry)
	k = binary.BigEndian.AppendUint64(k, uint64(expiresAtMs))
	k = append(k, expiryGroup)
	k = binary.BigEndian.AppendUint64(k, partitionID)
	k = binary.BigEndian.AppendUint64(k, offset)
	return binary.BigEndian.AppendUint32(k, count)
}

// parseExpiryGroup reads a group's partition and count from the part of
// its key after the time (as parseExpiryKey returns it).
func parseExpiryGroup(rest []byte) (partitionID uint64, count uint32) {
	return beUint64(rest[1:]), binary.BigEndian.Uint32(rest[17:])
}

func expiryPrefix() []byte { return []byte{familyExpiry} }

// parseExpiryKey splits an expiry index key: dedupKey is the record's key,
// or for a group (expiryGroup) the partition id, offset and count.
func parseExpiryKey(k []byte) (expiresAtMs int64, dedupKey []byte, err error) {
	if len(k) < 10 || k[0] != familyExpiry {
		return 0, nil, errBadKey
	}
	switch k[9] {
	case familyDedup, familyDedupLong:
	case expiryGroup:
		if len(k) != 30 {
			return 0, nil, errBadKey
		}
	default:
		return 0, nil, errBadKey
	}
	return int64(binary.BigEndian.Uint64(k[1:9])), k[9:], nil
}

func appendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
