package command

import (
	"encoding/json"
)

// Log format 1 wrote four command types as JSON of the command structs
// (types 17–20). Their JSON names are that format, fixed for ever: every
// field the commands reach carries an explicit json tag, including those
// of Ack and PushItem, whose names were the Go field names then. Renaming
// one breaks the golden corpus (testdata/corpus/1). The leader still
// writes these while the cluster is at format 1 (a rolling upgrade from
// v0.1.0 that is not finished).

func (c *KVCommand) encodeAs(LogFormat) []byte { return encodeJSONCommand(CmdKVJSON, c) }

func (c *TransactionCommand) encodeAs(LogFormat) []byte {
	return encodeJSONCommand(CmdTransactionJSON, c)
}

func (c *TimersCommand) encodeAs(LogFormat) []byte { return encodeJSONCommand(CmdTimersJSON, c) }

func (c *TickCommand) encodeAs(LogFormat) []byte { return encodeJSONCommand(CmdTickJSON, c) }

// encodeJSONCommand writes a format 1 JSON entry. encoding/json writes
// struct fields in declaration order and maps sorted, so the entry is the
// same bytes on every call.
func encodeJSONCommand(t CommandType, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("command: encode command: " + err.Error()) // plain structs: cannot fail
	}
	return append([]byte{byte(t)}, b...)
}

func decodeJSONCommand[T any](b []byte) (*T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
