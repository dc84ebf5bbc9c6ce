import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a KIP-848 consumer group (group.protocol=consumer) for a test that mixes clients in one
 * group.  Usage: Kip848Member BOOTSTRAP GROUP TOPIC.  It polls, prints each record's value and each change
 * of its assignment as one JSON object per line on stdout ({"value": ...}, {"assigned": [...]}), commits
 * synchronously after every poll that returned records, and closes (leaving the group) when its standard
 * input reaches its end or says "stop"; then prints {"closed": true}.
 */
public final class Kip848Member {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (java.io.IOException e) {
                // end of input either way
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        String assigned = null;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<String, String> r : records) {
                    System.out.println("{\"value\": \"" + r.value() + "\"}");
                }
                if (!records.isEmpty()) {
                    consumer.commitSync(Duration.ofSeconds(30));
                }
                String now = partitions(consumer.assignment());
                if (!now.equals(assigned)) {
                    assigned = now;
                    System.out.println("{\"assigned\": " + now + "}");
                }
                System.out.flush();
            }
        }
        System.out.println("{\"closed\": true}");
    }

    static String partitions(Collection<TopicPartition> tps) {
        TreeSet<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : tps) {
            sorted.add(tp.partition());
        }
        return sorted.toString();
    }
}
