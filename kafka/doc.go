// Package kafka is waggle's Kafka wire-protocol listener: the connection
// loop, one file per API (named by its key, like 00_produce.go) that
// registers the versions it serves, and the mapping of broker outcomes to
// Kafka error codes. Requests are decoded and encoded with franz-go's kmsg.
//
// It holds no replicated state and never reads or writes the store: every
// request becomes calls on the Broker (broker.Service in waggle serve). It
// names the store's record types (a transaction's state, a topic's cleanup
// policy) and the log's command types (package command) where the Broker's
// answers carry them. Its own memory holds per-connection state, fetch
// sessions and the consumer-group coordinators, which a new leader
// rebuilds.
package kafka
