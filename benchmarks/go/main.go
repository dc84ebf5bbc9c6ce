// franz-go's side of benchmarks/client.py --broker apache-kafka, at its defaults (acks=all, idempotent).
//
//	go run . produce BOOTSTRAP TOPIC N VALUE_SIZE
//	go run . consume BOOTSTRAP TOPIC N
//	go run . latency BOOTSTRAP TOPIC N VALUE_SIZE
//	go run . group BOOTSTRAP TOPIC N GROUP
//
// Prints one JSON line, as benchmarks/java/ClientBench.java does: {"seconds": S} for produce (creating
// the client to the last acknowledgement) and consume (creating the client to the Nth record of partition
// 0, read from the start without a group), {"latencies_ms": [...]} for latency (each send awaited).
// group is the real-traffic tests' scenario: N keyed records produced, read back as a member of GROUP,
// committed, then {"generation": G} (the generation the client saw) before the client leaves.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 5 {
		fail(fmt.Errorf("usage: produce|consume|latency BOOTSTRAP TOPIC N [VALUE_SIZE]"))
	}
	mode, bootstrap, topic := os.Args[1], os.Args[2], os.Args[3]
	n, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	out := map[string]any{}
	switch mode {
	case "produce", "latency":
		size, err := strconv.Atoi(os.Args[5])
		if err != nil {
			fail(err)
		}
		value := make([]byte, size)
		start := time.Now()
		client, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic))
		if err != nil {
			fail(err)
		}
		if mode == "produce" {
			var wg sync.WaitGroup
			var failed error
			var mu sync.Mutex
			wg.Add(n)
			for i := 0; i < n; i++ {
				client.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			if failed != nil {
				fail(failed)
			}
			client.Close()
			out["seconds"] = time.Since(start).Seconds()
		} else {
			latencies := make([]float64, 0, n)
			for i := 0; i < n; i++ {
				t := time.Now()
				if err := client.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
					fail(err)
				}
				latencies = append(latencies, float64(time.Since(t).Nanoseconds())/1e6)
			}
			client.Close()
			out["latencies_ms"] = latencies
		}
	case "consume":
		start := time.Now()
		client, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(
			map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			fail(err)
		}
		got := 0
		for got < n {
			fetches := client.PollFetches(ctx)
			if errs := fetches.Errors(); len(errs) > 0 {
				fail(errs[0].Err)
			}
			got += fetches.NumRecords()
		}
		client.Close()
		out["seconds"] = time.Since(start).Seconds()
	case "group":
		group := os.Args[5]
		producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic),
			kgo.ClientID("franz-go-producer"))
		if err != nil {
			fail(err)
		}
		for i := 0; i < n; i++ {
			record := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("value-%d", i))}
			if err := producer.ProduceSync(ctx, record).FirstErr(); err != nil {
				fail(err)
			}
		}
		producer.Close()
		consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic), kgo.ClientID("franz-go-consumer"), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			fail(err)
		}
		deadline, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		got := 0
		for got < n {
			fetches := consumer.PollFetches(deadline)
			if errs := fetches.Errors(); len(errs) > 0 {
				fail(errs[0].Err)
			}
			got += fetches.NumRecords()
		}
		if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
			fail(err)
		}
		_, generation := consumer.GroupMetadata()
		consumer.Close()
		out["generation"] = generation
	default:
		fail(fmt.Errorf("mode: produce, consume, latency or group, not %q", mode))
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
