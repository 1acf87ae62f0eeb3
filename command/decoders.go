package command

import (
	"errors"
	"fmt"
)

// decoders is every command type's decoder (the entry without its type
// byte). The state machine's handlers and the fuzz tests reach them here.
var decoders = map[CommandType]func([]byte) (Command, error){}

// registerCodec adds a command type's decoder; a type registered twice
// panics at start-up.
func registerCodec[C any, PC interface {
	*C
	Command
}](t CommandType, decode func([]byte) (PC, error)) {
	if _, dup := decoders[t]; dup {
		panic(fmt.Sprintf("command: command type %d has two decoders", t))
	}
	decoders[t] = func(b []byte) (Command, error) {
		cmd, err := decode(b)
		if err != nil {
			return nil, err
		}
		return cmd, nil
	}
}

func init() {
	registerCodec(CmdPush, decodePush)
	registerCodec(CmdConfigureQueue, decodeConfigureQueue)
	registerCodec(CmdPruneDedup, decodePruneDedup)
	registerCodec(CmdRegisterNode, decodeRegisterNode)
	registerCodec(CmdForgetNode, decodeForgetNode)
	registerCodec(CmdCreateTopic, decodeCreateTopic)
	registerCodec(CmdProduce, decodeProduce)
	registerCodec(CmdAddPartitions, decodeAddPartitions)
	registerCodec(CmdDeleteQueue, decodeDeleteQueue)
	registerCodec(CmdNewProducerID, decodeNewProducerID)
	registerCodec(CmdCommitOffsets, decodeCommitOffsets)
	registerCodec(CmdDeleteOffsets, decodeDeleteOffsets)
	registerCodec(CmdPop, decodePop)
	registerCodec(CmdAck, decodeAck)
	registerCodec(CmdExtendLease, decodeExtendLease)
	registerCodec(CmdSeek, decodeSeek)
	registerCodec(CmdKVJSON, decodeJSONCommand[KVCommand])
	registerCodec(CmdTransactionJSON, decodeJSONCommand[TransactionCommand])
	registerCodec(CmdTimersJSON, decodeJSONCommand[TimersCommand])
	registerCodec(CmdTickJSON, decodeJSONCommand[TickCommand])
	registerCodec(CmdCleanup, decodeCleanup)
	registerCodec(CmdRetain, decodeRetain)
	registerCodec(CmdKV, decodeKV)
	registerCodec(CmdTransaction, decodeTransaction)
	registerCodec(CmdTimers, decodeTimers)
	registerCodec(CmdTick, decodeTick)
	registerCodec(CmdSetLogFormat, decodeSetLogFormat)
	registerCodec(CmdAlterTopic, decodeAlterTopic)
	registerCodec(CmdDeleteRecords, decodeDeleteRecords)
	registerCodec(CmdInitTxnProducer, decodeInitTxnProducer)
	registerCodec(CmdAddToTxn, decodeAddToTxn)
	registerCodec(CmdTxnOffsetCommit, decodeTxnOffsetCommit)
	registerCodec(CmdEndTxn, decodeEndTxn)
	registerCodec(CmdEndTxnBump, decodeEndTxnBump)
	registerCodec(CmdAlterACLs, decodeAlterACLs)
	registerCodec(CmdForgetTxns, decodeForgetTxns)
	registerCodec(CmdCompact, decodeCompact)
	registerCodec(CmdReplayDeadLetter, decodeReplayDeadLetter)
	registerCodec(CmdDeleteDeadLetters, decodeDeleteDeadLetters)
	registerCodec(CmdKeyed, decodeKeyed)
	registerCodec(CmdPruneRequests, decodePruneRequests)
	registerCodec(CmdSeedIDs, decodeSeedIDs)
	registerCodec(CmdPreferLeader, decodePreferLeader)
	registerCodec(CmdSetReplicas, decodeSetReplicas)
	registerCodec(CmdSaveClassicGroup, decodeSaveClassicGroup)
	registerCodec(CmdAlterGroupConfig, decodeAlterGroupConfig)
	registerCodec(CmdShareAcquire, decodeShareAcquire)
	registerCodec(CmdShareAck, decodeShareAck)
	registerCodec(CmdShareAcquireShared, decodeShareAcquireShared)
}

// KnownCommand reports whether this binary decodes command type t.
func KnownCommand(t CommandType) bool { return decoders[t] != nil }

// DecodeCommand decodes an entry as Encode writes it (type byte first).
func DecodeCommand(entry []byte) (Command, error) {
	if len(entry) == 0 {
		return nil, errors.New("command: an empty entry")
	}
	dec, ok := decoders[CommandType(entry[0])]
	if !ok {
		return nil, fmt.Errorf("command: no command type %d", entry[0])
	}
	return dec(entry[1:])
}

// CheckEntry reports whether entry (a command as Encode writes it) is one
// this binary can decode.
func CheckEntry(entry []byte) error {
	_, err := DecodeCommand(entry)
	return err
}
