package broker

import (
	"fmt"
	"unicode/utf8"
)

// DefaultPartition is the partition of a push that names none.
const DefaultPartition = "Default"

// Queue names follow Kafka's topic rules, since every queue is also a Kafka
// topic: 1 to 249 characters from [a-zA-Z0-9._-], and not "." or "..".
const maxQueueName = 249

// maxPartitionName bounds a partition name in bytes.
const maxPartitionName = 1024

func validateQueueName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: queue is required", ErrInvalid)
	}
	if len(name) > maxQueueName {
		return fmt.Errorf("%w: queue name longer than %d characters", ErrInvalid, maxQueueName)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: queue name %q is reserved", ErrInvalid, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: queue name %q: only letters, digits, '.', '_' and '-' are allowed", ErrInvalid, name)
		}
	}
	return nil
}

// partitionName applies the default and checks the name.
func partitionName(name string) (string, error) {
	if name == "" {
		return DefaultPartition, nil
	}
	if len(name) > maxPartitionName {
		return "", fmt.Errorf("%w: partition name longer than %d bytes", ErrInvalid, maxPartitionName)
	}
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: partition name is not valid UTF-8", ErrInvalid)
	}
	return name, nil
}

// MaxGroupName bounds a consumer group name in bytes, over HTTP and Kafka
// alike. A group name is in every cursor, subscription and group key
// (badger refuses keys over 65,000 bytes, and the keys carry its length in
// two bytes), and a commit writes one cursor key per offset, so the name's
// length multiplies into an entry's size.
const MaxGroupName = 1024

// ValidGroupName reports whether name is a usable consumer group name.
func ValidGroupName(name string) bool { return validateGroupName(name) == nil }

func validateGroupName(name string) error {
	if len(name) > MaxGroupName {
		return fmt.Errorf("%w: consumer group name longer than %d bytes", ErrInvalid, MaxGroupName)
	}
	return nil
}
