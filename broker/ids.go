package broker

import (
	"fmt"
	"strconv"
)

// parsePartitionID reads a partitionId exactly as the broker hands it out
// (strconv.FormatUint in base 10): decimal digits only, without a sign,
// spaces, a base prefix or a leading zero. /api/v1/ack and the acks of a
// transaction both read it here, so a value is accepted by both or by
// neither (fmt.Sscan, used before for transactions, took "12abc", " 12"
// and "0x1f").
func parsePartitionID(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != s {
		return 0, fmt.Errorf("%w: partitionId %q is not one this broker handed out", ErrInvalid, s)
	}
	return n, nil
}
