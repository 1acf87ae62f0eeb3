// Package client owns the wire side of waggle's native HTTP API as a Go
// program that calls it sees it: the JSON answers' types (the ones the
// server's openapi.json calls Queue, PushResult, Group, Cluster,
// DeadLetter, ...) and a small client that sends requests, reads answers
// and errors, and retries what is safe to send again (reads, pushes whose
// messages carry transactionIds, and writes under an Idempotency-Key).
//
// It is a leaf: it imports only the standard library and never server
// code (broker, command, fsm, store, kafka, broker/httpapi), so a program can
// use it without linking the broker. The server keeps its own types; its
// contract tests in broker/httpapi read answers through these, and the
// integration tests keep independent copies on purpose.
//
// Today it serves the waggle CLI, and its error messages name the CLI's
// flags (--server, --ca-file, --retry-timeout). A later step grows it into
// a full Go client of the API.
package client
