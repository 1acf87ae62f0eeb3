package command

// Answering is a command whose state-machine answer is R. fsm.register ties
// each command type's apply function to the answer its command declares,
// so the broker's typed apply (which takes an Answering[R]) cannot expect
// another type than the state machine returns: a mismatch does not
// compile.
type Answering[R any] interface {
	Command
	answers(R)
}

// What each command answers.
func (*PushCommand) answers([]PushResult)                   {}
func (*ConfigureQueueCommand) answers(ConfigureQueueResult) {}
func (*PruneDedupCommand) answers(PruneDedupResult)         {}
func (*RegisterNodeCommand) answers(any)                    {} // nothing (nil)
func (*ForgetNodeCommand) answers(any)                      {} // nothing (nil)
func (*CreateTopicCommand) answers(TopicOutcome)            {}
func (*ProduceCommand) answers(ProduceResult)               {}
func (*AddPartitionsCommand) answers(TopicOutcome)          {}
func (*DeleteQueueCommand) answers(TopicOutcome)            {}
func (*NewProducerIDCommand) answers(int64)                 {}
func (*CommitOffsetsCommand) answers([]TopicOutcome)        {}
func (*DeleteOffsetsCommand) answers(int)                   {} // groups deleted
func (*PopCommand) answers(PopResult)                       {}
func (*AckCommand) answers([]AckResult)                     {}
func (*ExtendLeaseCommand) answers(ExtendLeaseResult)       {}
func (*SeekCommand) answers(TopicOutcome)                   {}
func (*KVCommand) answers(KVCallResult)                     {}
func (*TransactionCommand) answers(TransactionResult)       {}
func (*TimersCommand) answers([]TimerResult)                {}
func (*TickCommand) answers(TickResult)                     {}
func (*CleanupCommand) answers(CleanupResult)               {}
func (*RetainCommand) answers(RetainResult)                 {}
func (*SetLogFormatCommand) answers(LogFormat)              {}
func (*AlterTopicCommand) answers(TopicOutcome)             {}
func (*DeleteRecordsCommand) answers([]DeleteRecordsResult) {}
func (*InitTxnProducerCommand) answers(TxnProducerResult)   {}
func (*AddToTxnCommand) answers(AddToTxnResult)             {}
func (*TxnOffsetCommitCommand) answers([]TopicOutcome)      {}
func (*EndTxnCommand) answers(TopicOutcome)                 {}
func (*EndTxnBumpCommand) answers(TxnProducerResult)        {}
func (*AlterACLsCommand) answers(AlterACLsResult)           {}
func (*ForgetTxnsCommand) answers(int)                      {} // ids forgotten
func (*CompactCommand) answers(CompactResult)               {}
func (*ReplayDeadLetterCommand) answers(ReplayResult)       {}
func (*DeleteDeadLettersCommand) answers(int)               {} // dead letters deleted
func (*KeyedCommand) answers(KeyedResult)                   {}
func (*PruneRequestsCommand) answers(int)                   {} // outcomes forgotten
func (*SeedIDsCommand) answers(uint64)                      {} // the id counter after it
func (*PreferLeaderCommand) answers(any)                    {}
func (*SetReplicasCommand) answers(any)                     {}
func (*SaveClassicGroupCommand) answers(any)                {}
func (*AlterGroupConfigCommand) answers(any)                {}
func (*ShareAcquireCommand) answers(ShareAcquireResult)     {}
func (*ShareAckCommand) answers([]ShareAckResult)           {}
