package store

import (
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
//	familyDedup     [0x06] partitionID(8) transactionID     -> dedup record (versioned)
//	familyExpiry    [0x07] expiresAtMs(8) partitionID(8) transactionID -> empty
//
// The expiry family is ordered by time first, so pruning dedup entries whose
// window has passed is a prefix scan from the start, in the same order on
// every replica.
const (
	familyMeta      byte = 0x01
	familyQueue     byte = 0x02
	familyPartition byte = 0x03
	familyPartMeta  byte = 0x04
	familyMessage   byte = 0x05
	familyDedup     byte = 0x06
	familyExpiry    byte = 0x07
)

// errBadKey reports a key that does not parse as its family says.
var errBadKey = errors.New("store: malformed key")

func metaKey() []byte { return []byte{familyMeta} }

func queueKey(name string) []byte {
	return append([]byte{familyQueue}, name...)
}

func queuePrefix() []byte { return []byte{familyQueue} }

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

func dedupKey(partitionID uint64, txID string) []byte {
	k := make([]byte, 0, 9+len(txID))
	k = append(k, familyDedup)
	k = binary.BigEndian.AppendUint64(k, partitionID)
	return append(k, txID...)
}

func expiryKey(expiresAtMs int64, partitionID uint64, txID string) []byte {
	k := make([]byte, 0, 17+len(txID))
	k = append(k, familyExpiry)
	k = binary.BigEndian.AppendUint64(k, uint64(expiresAtMs))
	k = binary.BigEndian.AppendUint64(k, partitionID)
	return append(k, txID...)
}

func expiryPrefix() []byte { return []byte{familyExpiry} }

func parseExpiryKey(k []byte) (expiresAtMs int64, partitionID uint64, txID string, err error) {
	if len(k) < 17 || k[0] != familyExpiry {
		return 0, 0, "", errBadKey
	}
	return int64(binary.BigEndian.Uint64(k[1:9])), binary.BigEndian.Uint64(k[9:17]), string(k[17:]), nil
}

func appendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
