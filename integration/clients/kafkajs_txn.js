// KafkaJS 2.2.4 transactions against waggle: a transactional producer
// commits three records with a consumer group offset, aborts two, and a
// read_committed consumer reads the committed ones. Prints the values read
// and the group's committed offset, e.g. "js-c0,js-c1,js-c2;offset=2".
//
// Usage: node kafkajs_txn.js HOST:PORT[,HOST:PORT...] TOPIC GROUP
const { Kafka, logLevel } = require('kafkajs');

const [addr, topic, group] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'waggle-txn-test', brokers: addr.split(','), logLevel: logLevel.ERROR });

async function main() {
  const producer = kafka.producer({ transactionalId: `${topic}.txn`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();

  const committed = await producer.transaction();
  await committed.send({ topic, messages: [0, 1, 2].map((i) => ({ value: `js-c${i}` })) });
  await committed.sendOffsets({ consumerGroupId: `${group}-offsets`, topics: [{ topic, partitions: [{ partition: 0, offset: '2' }] }] });
  await committed.commit();

  const aborted = await producer.transaction();
  await aborted.send({ topic, messages: [0, 1].map((i) => ({ value: `js-a${i}` })) });
  await aborted.sendOffsets({ consumerGroupId: `${group}-offsets`, topics: [{ topic, partitions: [{ partition: 0, offset: '99' }] }] });
  await aborted.abort();
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${got.length} of 3: ${got}`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length === 3) {
          clearTimeout(timer);
          // Give an aborted record the chance to show up, should it.
          setTimeout(resolve, 1000);
        }
      },
    });
  });
  await consumer.disconnect();

  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId: `${group}-offsets`, topics: [topic] });
  await admin.disconnect();
  console.log(`${got.join(',')};offset=${offsets[0].partitions[0].offset}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
