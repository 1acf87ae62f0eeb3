"""kafka-python 2.0.2 against waggle: produce three records, then read them
back as a consumer group member and commit. Prints the values read.

Usage: python3 kafka_python_roundtrip.py HOST:PORT[,HOST:PORT...] TOPIC GROUP
"""
import sys

from kafka import KafkaConsumer, KafkaProducer

addr, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]

producer = KafkaProducer(bootstrap_servers=addr, acks="all", retries=5)
for i in range(3):
    producer.send(topic, key=b"k%d" % i, value=b"py-%d" % i).get(timeout=30)
producer.flush()
producer.close()

consumer = KafkaConsumer(
    topic,
    bootstrap_servers=addr,
    group_id=group,
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    consumer_timeout_ms=20000,
)
got = []
for msg in consumer:
    got.append(msg.value.decode())
    if len(got) == 3:
        break
consumer.commit()
consumer.close()
print(",".join(got))
