// The Java client at its defaults as a peer: produce COUNT keyed records to TOPIC, read them back as a
// member of GROUP, commit synchronously, print the group generation the consumer saw, close both.
//
//   java -cp 'JARS/*' ClientProbe.java BOOTSTRAP TOPIC GROUP COUNT
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ClientProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "java-producer");
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, ("k" + i).getBytes(), ("value-" + i).getBytes()));
            }
            producer.flush();
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("client.id", "java-consumer");
        c.put("group.id", group);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("read " + seen + " of " + count + " records");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    seen++;
                }
            }
            consumer.commitSync();
            System.out.println("generation " + consumer.groupMetadata().generationId());
        }
    }
}
