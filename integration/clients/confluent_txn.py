"""confluent-kafka-python (librdkafka) transactions against waggle.

A transactional producer commits three records and aborts two; a
read_committed consumer reads the committed ones; then the
consume-transform-produce step: the consumer's position is committed through
send_offsets_to_transaction with a record written to the output topic, and a
second attempt is aborted. Prints the values read and whether the group's
committed offsets are the positions sent, e.g. "py-c0,py-c1,py-c2;offsets=ok".

Usage: python3 confluent_txn.py HOST:PORT[,HOST:PORT...] TOPIC GROUP
"""
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

addr, topic, group = sys.argv[1:4]

producer = Producer({"bootstrap.servers": addr, "transactional.id": topic + ".txn"})
producer.init_transactions(30)

producer.begin_transaction()
for i in range(3):
    producer.produce(topic, value=f"py-c{i}".encode())
producer.commit_transaction(30)

producer.begin_transaction()
for i in range(2):
    producer.produce(topic, value=f"py-a{i}".encode())
producer.flush(30)
producer.abort_transaction(30)

consumer = Consumer({
    "bootstrap.servers": addr,
    "group.id": group,
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
})
consumer.subscribe([topic])
got = []
for _ in range(60):
    msg = consumer.poll(1.0)
    if msg is None:
        if len(got) >= 3:
            break  # nothing more: an aborted record would have come by now
        continue
    if msg.error():
        raise SystemExit(f"consume: {msg.error()}")
    got.append(msg.value().decode())

# The consumer's position goes into a transaction with an output record.
# The output topic and the transactional id share the topic's name up to its
# first dot: with several raft groups a transaction writes its own group's
# topics only.
producer.begin_transaction()
producer.produce(topic + ".out", value=b"derived")
positions = consumer.position(consumer.assignment())
producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
producer.commit_transaction(30)

# A second attempt that aborts leaves the committed offsets as they were.
producer.begin_transaction()
producer.send_offsets_to_transaction([TopicPartition(topic, 0, 0)], consumer.consumer_group_metadata(), 30)
producer.abort_transaction(30)

committed = consumer.committed(consumer.assignment(), timeout=30)
want = {(tp.topic, tp.partition): tp.offset for tp in positions}
ok = all(want[(tp.topic, tp.partition)] == tp.offset for tp in committed) and len(committed) == len(want)
consumer.close()
print(",".join(got) + ";offsets=" + ("ok" if ok else f"{[(tp.partition, tp.offset) for tp in committed]} want {want}"))
