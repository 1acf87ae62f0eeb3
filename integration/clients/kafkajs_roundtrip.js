// KafkaJS 2.2.4 against waggle: an idempotent producer writes three
// records, a consumer-group member reads them back and commits. Prints the
// values read, comma-separated.
//
// Usage: node kafkajs_roundtrip.js HOST:PORT[,HOST:PORT...] TOPIC GROUP
const { Kafka, logLevel } = require('kafkajs');

const [addr, topic, group] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'waggle-test', brokers: addr.split(','), logLevel: logLevel.ERROR });

async function main() {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  await producer.send({
    topic,
    acks: -1,
    messages: [0, 1, 2].map((i) => ({ key: `k${i}`, value: `js-${i}` })),
  });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${got.length} of 3`)), 30000);
    consumer.run({
      eachMessage: async ({ message }) => {
        got.push(message.value.toString());
        if (got.length === 3) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  console.log(got.join(','));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
