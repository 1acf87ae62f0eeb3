package command

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Every command entry carries a CRC-32C of its bytes at its end. raft's
// bolt log has no checksums of its own, so without it a flipped bit on one
// node's disk would be applied as a different command there, and that
// replica would silently diverge; with it the node refuses the entry.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrEntryChecksum reports a command entry whose bytes do not match their
// checksum: the log on this node's disk is damaged.
var ErrEntryChecksum = errors.New("command: command entry fails its checksum")

// Seal appends cmd's checksum, ready for raft.Apply.
func Seal(cmd []byte) []byte {
	return binary.BigEndian.AppendUint32(cmd, crc32.Checksum(cmd, castagnoli))
}

// unseal checks and strips a sealed entry's checksum.
func Unseal(data []byte) ([]byte, error) {
	if len(data) < 5 {
		return nil, ErrEntryChecksum
	}
	cmd, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(cmd, castagnoli) != sum {
		return nil, ErrEntryChecksum
	}
	return cmd, nil
}
