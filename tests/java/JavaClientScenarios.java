import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Apache Kafka's Java client at its defaults against a broker, one scenario per argument, in one JVM.
 *
 * Usage: JavaClientScenarios BOOTSTRAP SCENARIO... (produce, codecs, consume, admin, transactions,
 * cluster-produce, cluster-consume).
 * Every outcome is one JSON object per line on stdout: {"scenario":..., "step":..., "ok":..., ...}; a
 * failed step carries the exception class and message ("error"), so the test states what Kafka's client
 * saw.  Every wait is bounded, so a broker that never answers shows as a TimeoutException, not a hang.
 */
public final class JavaClientScenarios {
    static final int N = 3000;
    static final long STEP_TIMEOUT_S = 60;
    /** Records of the cluster scenarios: "r<seq>" to partition seq % 3 of topic $CLUSTER_TOPIC ("t"). */
    static final int CLUSTER_N = 600;
    static final String CLUSTER_TOPIC = System.getenv().getOrDefault("CLUSTER_TOPIC", "t");
    static final BufferedReader STDIN = new BufferedReader(new InputStreamReader(System.in));
    static String bootstrap;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "produce": produce(); break;
                case "codecs": codecs(); break;
                case "consume": consume(); break;
                case "admin": admin(); break;
                case "transactions": transactions(); break;
                case "cluster-produce": clusterProduce(); break;
                case "cluster-consume": clusterConsume(); break;
                default: throw new IllegalArgumentException("unknown scenario " + args[i]);
            }
        }
        emit("done", "all", true, Map.of());
    }

    // ------------------------------------------------------------------------------------ output

    static String json(Object value) {
        if (value == null) return "null";
        if (value instanceof Boolean || value instanceof Number) return value.toString();
        if (value instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (sb.length() > 1) sb.append(',');
                sb.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        if (value instanceof Collection) {
            StringBuilder sb = new StringBuilder("[");
            for (Object o : (Collection<?>) value) {
                if (sb.length() > 1) sb.append(',');
                sb.append(json(o));
            }
            return sb.append(']').toString();
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char c : value.toString().toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }

    static synchronized void emit(String scenario, String step, boolean ok, Map<String, ?> fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("scenario", scenario);
        line.put("step", step);
        line.put("ok", ok);
        line.putAll(fields);
        System.out.println(json(line));
        System.out.flush();
    }

    interface Step { Map<String, ?> run() throws Exception; }

    /** Runs one step, reporting its result or the exception it ended with (the cause of an ExecutionException). */
    static void step(String scenario, String name, Step body) {
        try {
            emit(scenario, name, true, body.run());
        } catch (Throwable t) {
            Throwable cause = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
            emit(scenario, name, false, Map.of("error", cause.getClass().getName(),
                    "message", String.valueOf(cause.getMessage())));
        }
    }

    static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(STEP_TIMEOUT_S, TimeUnit.SECONDS);
    }

    static Properties base() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    // ------------------------------------------------------------------------------------ scenarios

    /** The producer at its defaults (idempotent, acks=all): N records over topic "jt", keyed. */
    static void produce() {
        step("produce", "send", () -> {
            Properties p = base();
            try (KafkaProducer<String, String> producer =
                         new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < N; i++) {
                    sent.add(producer.send(new ProducerRecord<>("jt", "k" + (i % 31), "v" + i)));
                }
                producer.flush();
                Map<String, Integer> perPartition = new TreeMap<>();
                for (java.util.concurrent.Future<RecordMetadata> f : sent) {
                    RecordMetadata md = f.get(STEP_TIMEOUT_S, TimeUnit.SECONDS);
                    perPartition.merge(String.valueOf(md.partition()), 1, Integer::sum);
                }
                return Map.of("sent", sent.size(), "per_partition", perPartition);
            }
        });
    }

    /**
     * Each compression codec the Java client writes (gzip, snappy, lz4, zstd): 500 records to topic
     * "jc-CODEC", read back by a consumer assigned to its partition (no group).
     */
    static void codecs() {
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            step("codecs", codec, () -> {
                String topic = "jc-" + codec;
                Properties p = base();
                p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                try (KafkaProducer<String, String> producer =
                             new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                    for (int i = 0; i < 500; i++) producer.send(new ProducerRecord<>(topic, "k" + i, codec + "-" + i));
                    producer.flush();
                }
                Properties c = base();
                c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                try (KafkaConsumer<String, String> consumer =
                             new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
                    consumer.assign(List.of(new TopicPartition(topic, 0)));
                    List<String> values = new ArrayList<>();
                    for (ConsumerRecord<String, String> r : pollUntil(consumer, 500, STEP_TIMEOUT_S * 1000, 0)) values.add(r.value());
                    return Map.of("values", values);
                }
            });
        }
    }

    static KafkaConsumer<String, String> consumer(String group, Map<String, Object> extra) {
        Properties p = base();
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.putAll(extra);
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    /** Polls until ``expected`` records or the deadline; returns the values in order of arrival. */
    static List<ConsumerRecord<String, String>> pollUntil(KafkaConsumer<String, String> c, int expected,
                                                          long deadlineMs, long quietMs) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long end = System.currentTimeMillis() + deadlineMs;
        long lastNew = System.currentTimeMillis();
        while (System.currentTimeMillis() < end) {
            int before = out.size();
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) out.add(r);
            if (out.size() != before) lastNew = System.currentTimeMillis();
            if (out.size() >= expected && System.currentTimeMillis() - lastNew >= quietMs) break;
        }
        return out;
    }

    /** A consumer in group "jg" (classic protocol) reads topic "jt" back and commits synchronously. */
    static void consume() {
        step("consume", "read_and_commit", () -> {
            try (KafkaConsumer<String, String> c = consumer("jg", Map.of())) {
                c.subscribe(List.of("jt"));
                List<ConsumerRecord<String, String>> got = pollUntil(c, N, STEP_TIMEOUT_S * 1000, 0);
                c.commitSync(Duration.ofSeconds(STEP_TIMEOUT_S));
                Map<String, Long> committed = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                        c.committed(c.assignment(), Duration.ofSeconds(STEP_TIMEOUT_S)).entrySet()) {
                    if (e.getValue() != null) committed.put(String.valueOf(e.getKey().partition()), e.getValue().offset());
                }
                List<String> values = new ArrayList<>();
                Map<String, List<Long>> offsets = new TreeMap<>();
                for (ConsumerRecord<String, String> r : got) {
                    values.add(r.value());
                    offsets.computeIfAbsent(String.valueOf(r.partition()), k -> new ArrayList<>()).add(r.offset());
                }
                return Map.of("values", values, "offsets", offsets, "committed", committed,
                        "protocol", "classic");
            }
        });
    }

    /** Admin calls: each either works as on Kafka or is refused with the exception Kafka's client raises. */
    static void admin() {
        Properties p = base();
        try (Admin admin = Admin.create(p)) {
            String s = "admin";
            step(s, "create_topics", () -> {
                get(admin.createTopics(List.of(new NewTopic("ja", 2, (short) 1))).all());
                return Map.of();
            });
            step(s, "create_topics_duplicate", () -> {
                get(admin.createTopics(List.of(new NewTopic("ja", 2, (short) 1))).all());
                return Map.of();
            });
            step(s, "create_partitions", () -> {
                get(admin.createPartitions(Map.of("ja", NewPartitions.increaseTo(4))).all());
                return Map.of();
            });
            step(s, "describe_topics", () -> {
                Map<String, TopicDescription> d = get(admin.describeTopics(List.of("ja", "jt")).allTopicNames());
                Map<String, Object> parts = new TreeMap<>();
                for (TopicDescription t : d.values()) parts.put(t.name(), t.partitions().size());
                return Map.of("partitions", parts, "topic_id_set",
                        !d.get("ja").topicId().equals(org.apache.kafka.common.Uuid.ZERO_UUID));
            });
            step(s, "describe_cluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                return Map.of("nodes", get(r.nodes()).size(), "controller", get(r.controller()).id(),
                        "cluster_id", String.valueOf(get(r.clusterId())));
            });
            step(s, "describe_configs", () -> {
                ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, "ja");
                Map<ConfigResource, Config> got = get(admin.describeConfigs(List.of(topic)).all());
                Config c = got.get(topic);
                return Map.of("cleanup.policy", c.get("cleanup.policy").value(), "entries", c.entries().size());
            });
            step(s, "list_offsets", () -> {
                TopicPartition tp = new TopicPartition("jt", 0);
                ListOffsetsResult.ListOffsetsResultInfo latest =
                        get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp));
                ListOffsetsResult.ListOffsetsResultInfo earliest =
                        get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp));
                ListOffsetsResult.ListOffsetsResultInfo maxTs =
                        get(admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp));
                return Map.of("latest", latest.offset(), "earliest", earliest.offset(), "max_timestamp", maxTs.offset());
            });
            step(s, "list_groups", () -> {
                Collection<GroupListing> groups = get(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all());
                List<String> ids = new ArrayList<>();
                for (GroupListing g : groups) ids.add(g.groupId() + ":" + g.groupState().map(Object::toString).orElse("?"));
                Collections.sort(ids);
                return Map.of("groups", ids);
            });
            step(s, "describe_groups", () -> {
                Map<String, ConsumerGroupDescription> d = get(admin.describeConsumerGroups(List.of("jg")).all());
                ConsumerGroupDescription g = d.get("jg");
                return Map.of("state", g.groupState().toString(), "members", g.members().size(),
                        "type", g.type().toString());
            });
            step(s, "list_group_offsets", () -> {
                Map<TopicPartition, OffsetAndMetadata> o = get(admin.listConsumerGroupOffsets("jg").partitionsToOffsetAndMetadata());
                long total = 0;
                for (OffsetAndMetadata m : o.values()) total += m.offset();
                return Map.of("partitions", o.size(), "total", total);
            });
            step(s, "alter_group_offsets", () -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (int i = 0; i < 3; i++) offsets.put(new TopicPartition("jt", i), new OffsetAndMetadata(1 + 4 * i));
                get(admin.alterConsumerGroupOffsets("jadm", offsets).all());
                Map<String, Long> got = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                        get(admin.listConsumerGroupOffsets("jadm").partitionsToOffsetAndMetadata()).entrySet()) {
                    got.put(e.getKey().toString(), e.getValue().offset());
                }
                return Map.of("offsets", got);
            });
            step(s, "delete_group_offsets", () -> {
                get(admin.deleteConsumerGroupOffsets("jadm", Set.of(new TopicPartition("jt", 2))).all());
                Map<TopicPartition, OffsetAndMetadata> o = get(admin.listConsumerGroupOffsets("jadm").partitionsToOffsetAndMetadata());
                List<String> left = new ArrayList<>();
                for (TopicPartition tp : o.keySet()) left.add(tp.toString());
                Collections.sort(left);
                return Map.of("left", left);
            });
            step(s, "delete_groups", () -> {
                get(admin.deleteConsumerGroups(List.of("jadm")).all());
                List<String> ids = new ArrayList<>();
                for (GroupListing g : get(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all())) ids.add(g.groupId());
                return Map.of("groups", ids);
            });
            step(s, "describe_unknown_topic", () -> {
                get(admin.describeTopics(List.of("nope")).allTopicNames());
                return Map.of();
            });
            step(s, "delete_records", () -> {
                // On "ja" (empty, deleted next): the records the other scenarios check stay whole.
                TopicPartition tp = new TopicPartition("ja", 0);
                return Map.of("low_watermark",
                        get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(0))).lowWatermarks().get(tp)).lowWatermark());
            });
            step(s, "delete_topics", () -> {
                get(admin.deleteTopics(List.of("ja")).all());
                Set<String> names = get(admin.listTopics().names());
                return Map.of("still_listed", names.contains("ja"));
            });
        }
    }

    /**
     * A transactional producer commits one batch, aborts one, commits another; a read_committed consumer
     * then sees exactly the committed records.  Each transaction also carries the offsets of a live member
     * of group "jxo" (sendOffsetsToTransaction with its group metadata: generation and member id checked
     * by the coordinator), so only the committed rounds' offsets become the group's.
     */
    static void transactions() {
        String s = "transactions";
        step(s, "commit_abort_commit", () -> {
            Properties p = base();
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "jtx");
            try (KafkaProducer<String, String> producer =
                         new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
                 KafkaConsumer<String, String> source = consumer("jxo", Map.of())) {
                source.subscribe(List.of("jt"));
                long end = System.currentTimeMillis() + STEP_TIMEOUT_S * 1000;
                while (source.assignment().isEmpty() && System.currentTimeMillis() < end) source.poll(Duration.ofMillis(100));
                producer.initTransactions();
                String[][] rounds = {{"commit", "c1", "5"}, {"abort", "a", "9"}, {"commit", "c2", "7"}};
                for (String[] round : rounds) {
                    producer.beginTransaction();
                    for (int i = 0; i < 10; i++) {
                        producer.send(new ProducerRecord<>("jx", String.valueOf(i), round[1] + "-" + i));
                    }
                    producer.sendOffsetsToTransaction(
                            Map.of(new TopicPartition("jt", 0), new OffsetAndMetadata(Long.parseLong(round[2]))),
                            source.groupMetadata());
                    producer.flush();
                    if (round[0].equals("commit")) producer.commitTransaction();
                    else producer.abortTransaction();
                }
                return Map.of("generation", source.groupMetadata().generationId());
            }
        });
        step(s, "read_committed", () -> {
            try (KafkaConsumer<String, String> c = consumer("jxg", Map.of(
                    ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
                c.subscribe(List.of("jx"));
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> r : pollUntil(c, 20, STEP_TIMEOUT_S * 1000, 1500)) values.add(r.value());
                Collections.sort(values);
                return Map.of("values", values);
            }
        });
    }

    // ------------------------------------------------------------------------- a cluster through failures

    /**
     * Tells the driving test that the scenario reached ``at`` and waits until it has injected the failure
     * (stopped a broker, moved a coordinator) and written a line back; returns when the scenario resumed,
     * in ms since the JVM started, so recovery times are measured from it.
     */
    static long pause(String scenario, String at) throws IOException {
        emit(scenario, "pause", true, Map.of("at", at));
        if (STDIN.readLine() == null) throw new IOException("the driving test closed stdin at " + at);
        return System.nanoTime() / 1_000_000;
    }

    /**
     * The producer at its defaults (idempotent, acks=all) sends CLUSTER_N records, one at a time with a 1 ms
     * pause; the test stops the leader of partition 1 a third of the way ("stop") and restarts it at two
     * thirds ("start").  recovery_ms: from the resume after the stop to the first record acknowledged on
     * partition 1 that was sent after it.
     */
    static void clusterProduce() {
        step("cluster-produce", "send", () -> {
            try (KafkaProducer<String, String> producer =
                         new KafkaProducer<>(base(), new StringSerializer(), new StringSerializer())) {
                long[] firstAckAfterStop = {Long.MAX_VALUE};
                List<String> failures = Collections.synchronizedList(new ArrayList<>());
                long stoppedAt = 0;
                for (int seq = 0; seq < CLUSTER_N; seq++) {
                    final boolean afterStop = seq >= CLUSTER_N / 3;
                    producer.send(new ProducerRecord<>(CLUSTER_TOPIC, seq % 3, null, "r" + seq), (md, e) -> {
                        if (e != null) failures.add(e.getClass().getName() + ": " + e.getMessage());
                        else if (afterStop && md.partition() == 1) {
                            synchronized (firstAckAfterStop) {
                                firstAckAfterStop[0] = Math.min(firstAckAfterStop[0], System.nanoTime() / 1_000_000);
                            }
                        }
                    });
                    if (seq == CLUSTER_N / 3 - 1) stoppedAt = pause("cluster-produce", "stop");
                    if (seq == 2 * CLUSTER_N / 3) {
                        Thread.sleep(300);  // some retries happen while it is down
                        pause("cluster-produce", "start");
                    }
                    Thread.sleep(1);
                }
                producer.flush();
                if (!failures.isEmpty()) throw new IllegalStateException(failures.size() + " failed: " + failures.get(0));
                synchronized (firstAckAfterStop) {
                    return Map.of("sent", CLUSTER_N, "recovery_ms", firstAckAfterStop[0] - stoppedAt);
                }
            }
        });
    }

    /**
     * A consumer of group "jcg" reads the topic and commits after every poll; half-way the test moves the
     * group's coordinator ("move").  recovery_ms: how long the first commit after the move took.  Then
     * ("resume") the test adds 30 records and a new member of the group reads only those.
     */
    static void clusterConsume() {
        String s = "cluster-consume";
        step(s, "read", () -> {
            try (KafkaConsumer<String, String> c = consumer("jcg", Map.of())) {
                c.subscribe(List.of(CLUSTER_TOPIC));
                List<Integer> seqs = new ArrayList<>();
                long recovery = -1;
                long end = System.currentTimeMillis() + STEP_TIMEOUT_S * 1000;
                while (seqs.size() < CLUSTER_N && System.currentTimeMillis() < end) {
                    var records = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : records) seqs.add(Integer.parseInt(r.value().substring(1)));
                    if (!records.isEmpty()) c.commitSync(Duration.ofSeconds(STEP_TIMEOUT_S));
                    if (recovery < 0 && seqs.size() >= CLUSTER_N / 2) {
                        long movedAt = pause(s, "move");
                        c.commitSync(Duration.ofSeconds(STEP_TIMEOUT_S));
                        recovery = System.nanoTime() / 1_000_000 - movedAt;
                    }
                }
                return Map.of("seqs", seqs, "recovery_ms", recovery);
            }
        });
        step(s, "resume", () -> {
            pause(s, "resume");
            try (KafkaConsumer<String, String> c = consumer("jcg", Map.of())) {
                c.subscribe(List.of(CLUSTER_TOPIC));
                List<Integer> seqs = new ArrayList<>();
                for (ConsumerRecord<String, String> r : pollUntil(c, 30, STEP_TIMEOUT_S * 1000, 0)) {
                    seqs.add(Integer.parseInt(r.value().substring(1)));
                }
                c.commitSync(Duration.ofSeconds(STEP_TIMEOUT_S));
                return Map.of("seqs", seqs);
            }
        });
    }
}
