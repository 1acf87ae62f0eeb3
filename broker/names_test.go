package broker

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateQueueName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"payments", true},
		{"a.b_c-D9", true},
		{strings.Repeat("q", 249), true},
		{"", false},
		{strings.Repeat("q", 250), false},
		{".", false},
		{"..", false},
		{"with space", false},
		{"slash/name", false},
		{"ünïcode", false},
	} {
		err := validateQueueName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("validateQueueName(%.20q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("error %v does not wrap ErrInvalid", err)
		}
	}
}

func TestPartitionName(t *testing.T) {
	if got, err := partitionName(""); err != nil || got != DefaultPartition {
		t.Fatalf("empty partition = %q, %v; want the default", got, err)
	}
	if got, err := partitionName("customer-42 / eu"); err != nil || got != "customer-42 / eu" {
		t.Fatalf("partition kept as %q, %v", got, err)
	}
	if _, err := partitionName(strings.Repeat("p", 1025)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("1025-byte partition: %v", err)
	}
	if _, err := partitionName("\xff\xfe"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid UTF-8 partition: %v", err)
	}
}
