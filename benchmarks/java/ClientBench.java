// The Java client's side of benchmarks/client.py --broker apache-kafka, at its defaults but acks.
//
//   java -cp 'JARS/*' ClientBench.java produce BOOTSTRAP TOPIC N VALUE_SIZE ACKS
//   java -cp 'JARS/*' ClientBench.java consume BOOTSTRAP TOPIC N
//   java -cp 'JARS/*' ClientBench.java latency BOOTSTRAP TOPIC N VALUE_SIZE
//
// Prints one JSON line: {"seconds": S} for produce (creating the producer to the last acknowledgement)
// and consume (creating the consumer to the Nth record of partition 0, read from the beginning without a
// group), {"latencies_ms": [...]} for latency (N sends, each awaited before the next, acks=all).
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ClientBench {
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String acks) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", acks);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        int n = Integer.parseInt(args[3]);
        if (mode.equals("produce")) {
            byte[] value = new byte[Integer.parseInt(args[4])];
            long start = System.nanoTime();
            try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, args[5])) {
                for (int i = 0; i < n; i++) {
                    producer.send(new ProducerRecord<>(topic, value));
                }
                producer.flush();
            }
            System.out.println("{\"seconds\": " + (System.nanoTime() - start) / 1e9 + "}");
        } else if (mode.equals("consume")) {
            Properties c = new Properties();
            c.put("bootstrap.servers", bootstrap);
            long start = System.nanoTime();
            try (KafkaConsumer<byte[], byte[]> consumer =
                     new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                TopicPartition tp = new TopicPartition(topic, 0);
                consumer.assign(List.of(tp));
                consumer.seekToBeginning(List.of(tp));
                int got = 0;
                while (got < n) {
                    got += consumer.poll(Duration.ofSeconds(5)).count();
                }
            }
            System.out.println("{\"seconds\": " + (System.nanoTime() - start) / 1e9 + "}");
        } else if (mode.equals("latency")) {
            byte[] value = new byte[Integer.parseInt(args[4])];
            List<Double> latencies = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, "all")) {
                for (int i = 0; i < n; i++) {
                    long t = System.nanoTime();
                    producer.send(new ProducerRecord<>(topic, value)).get();
                    latencies.add((System.nanoTime() - t) / 1e6);
                }
            }
            System.out.println("{\"latencies_ms\": " + latencies + "}");
        } else {
            throw new IllegalArgumentException("mode: produce, consume or latency, not " + mode);
        }
    }
}
