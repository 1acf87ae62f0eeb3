// Package kafka is waggle's Kafka wire-protocol listener: the connection
// loop, one file per API (named by its key, like 00_produce.go) that
// registers the versions it serves, and the mapping of broker outcomes to
// Kafka error codes. Requests are decoded and encoded with franz-go's kmsg.
//
// It holds no state and touches no storage: every request becomes calls on
// the Broker (broker.Service in waggle serve).
package kafka
