package fsm

import (
	"bytes"
	"testing"

	"github.com/waggle-mq/waggle/command"
)

// FuzzDecodeCommands feeds any bytes to every command type's decoder,
// found through the registry by the entry's type byte (seeded with the
// golden corpus scenario, one entry of every type). A decoder returns an
// error or a command, never panics (the FSM panics on an error on
// purpose, so the decoders themselves must not), and what it returns
// survives a round trip: encoded and decoded again, it encodes to the same
// bytes.
func FuzzDecodeCommands(f *testing.F) {
	for _, e := range corpusScenario() {
		f.Add(e.cmd.Encode())
		for _, format := range []command.LogFormat{command.LogFormat1} {
			if b, err := command.EncodeAs(e.cmd, format); err == nil {
				f.Add(b) // the format 1 layouts (JSON and older binary ones)
			}
		}
	}
	f.Add([]byte{byte(command.CmdPush), 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, entry []byte) {
		c, err := command.DecodeCommand(entry)
		if err != nil {
			return
		}
		once := c.Encode()
		again, err := command.DecodeCommand(once)
		if err != nil {
			t.Fatalf("type %d: a decoded command, encoded, does not decode: %v", entry[0], err)
		}
		if twice := again.Encode(); !bytes.Equal(once, twice) {
			t.Fatalf("type %d: a decoded command changed through a round trip:\n%x\n%x", entry[0], once, twice)
		}
	})
}

// Every registered command type has a decoder, and the fuzz seeds reach
// each: the golden corpus scenario holds one entry of every type.
func TestEveryCommandTypeHasADecoderAndASeed(t *testing.T) {
	seeded := map[command.CommandType]bool{}
	for _, e := range corpusScenario() {
		seeded[command.CommandType(e.cmd.Encode()[0])] = true
		if b, err := command.EncodeAs(e.cmd, command.LogFormat1); err == nil {
			seeded[command.CommandType(b[0])] = true
		}
	}
	for typ := range handlers {
		if !command.KnownCommand(typ) {
			t.Errorf("command type %d has a handler and no decoder", typ)
		}
		if !seeded[typ] {
			t.Errorf("command type %d has no fuzz seed: add it to corpusScenario", typ)
		}
	}
}
