package store

import "testing"

// Family bytes live in several files; two families sharing a byte would
// read each other's records (it happened once while adding transactions).
func TestKeyFamiliesAreDistinct(t *testing.T) {
	families := map[string]byte{
		"meta": familyMeta, "queue": familyQueue, "partition": familyPartition, "partMeta": familyPartMeta,
		"message": familyMessage, "dedup": familyDedup, "expiry": familyExpiry, "dedupLong": familyDedupLong,
		"node": familyNode, "producer": familyProducer, "cursor": familyCursor, "lease": familyLease,
		"subscr": familySubscr, "deadLetter": familyDeadLetter, "queueByID": familyQueueByID,
		"kv": familyKV, "kvExpiry": familyKVExpiry, "timer": familyTimer, "timerDue": familyTimerDue,
		"tombstone": familyTombstone, "group": familyGroup, "stream": familyStream, "segment": familySegment,
		"txn": familyTxn, "txnProducer": familyTxnProducer, "openTxn": familyOpenTxn, "abortedTxn": familyAbortedTxn, "txnGroup": familyTxnGroup, "txnDue": familyTxnDue,
		"compactState": familyCompactState, "compactIndexed": familyCompactIndexed, "keyIndex": familyKeyIndex,
		"request": familyRequest, "requestDue": familyRequestDue,
		"leaderPref": familyLeaderPref, "classicGroup": familyClassicGroup,
		"groupConfig": familyGroupConfig, "acl": familyACL, "replicas": familyReplicas,
	}
	owner := map[byte]string{}
	for name, b := range families {
		if other, dup := owner[b]; dup {
			t.Errorf("families %s and %s share byte %#x", name, other, b)
		}
		owner[b] = name
	}
}
