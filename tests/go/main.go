// Command peers runs franz-go (kgo) and Sarama at their defaults against a Kafka broker, one scenario per
// argument, and prints one JSON object per step on stdout: {"scenario", "step", "ok", ...}; a failed step
// carries "error".  Every wait is bounded by a deadline, so a broker that never answers shows as an error
// line, not a hang.
//
// Usage: peers BOOTSTRAP SCENARIO...   (kgo-produce, kgo-consume, kgo-transactions, kgo-group-transact,
// sarama-produce, sarama-group, kgo-cluster-produce, kgo-cluster-consume)
//
//	peers BOOTSTRAP kip848-member GROUP TOPIC   (one KIP-848 group member; see kip848Member)
//
// The kgo-cluster-* scenarios run through failures a driving test injects: at each such point the scenario
// prints a "pause" line and waits for a line on stdin.  kgo logs at info level to stderr, where the test
// reads which errors it met.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// N is the number of records each produce scenario writes.
const N = 2000

const stepTimeout = 60 * time.Second

var bootstrap string

func emit(scenario, step string, err error, fields map[string]any) {
	line := map[string]any{"scenario": scenario, "step": step, "ok": err == nil}
	for k, v := range fields {
		line[k] = v
	}
	if err != nil {
		line["error"] = err.Error()
	}
	out, _ := json.Marshal(line)
	fmt.Println(string(out))
}

func main() {
	bootstrap = os.Args[1]
	if len(os.Args) == 5 && os.Args[2] == "kip848-member" {
		kip848Member(os.Args[3], os.Args[4])
		return
	}
	for _, scenario := range os.Args[2:] {
		switch scenario {
		case "kgo-produce":
			kgoProduce()
		case "kgo-consume":
			kgoConsume()
		case "kgo-transactions":
			kgoTransactions()
		case "kgo-group-transact":
			kgoGroupTransact()
		case "sarama-produce":
			saramaProduce()
		case "sarama-group":
			saramaGroup()
		case "kgo-cluster-produce":
			kgoClusterProduce()
		case "kgo-cluster-consume":
			kgoClusterConsume()
		default:
			fmt.Fprintln(os.Stderr, "unknown scenario", scenario)
			os.Exit(2)
		}
	}
	emit("done", "all", nil, nil)
}

// ------------------------------------------------------------------------------------------- franz-go

// kip848Member is one member of a KIP-848 consumer group (kgo's ServerSideBalancer) for a test that mixes
// clients in one group.  It prints each record's value and each change of its assignment as one JSON
// object per line ({"value": ...}, {"assigned": [...]}), commits after every poll that returned records,
// and closes (leaving the group) when its standard input ends or says "stop"; then prints {"closed": true}.
func kip848Member(group, topic string) {
	var mu sync.Mutex
	owned := map[int32]bool{}
	say := func(line map[string]any) {
		out, _ := json.Marshal(line)
		fmt.Println(string(out))
	}
	report := func() {
		now := []int{}
		for p := range owned {
			now = append(now, int(p))
		}
		sort.Ints(now)
		say(map[string]any{"assigned": now})
	}
	change := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range parts[topic] {
				if add {
					owned[p] = true
				} else {
					delete(owned, p)
				}
			}
			report()
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(change(true)), kgo.OnPartitionsRevoked(change(false)),
		kgo.OnPartitionsLost(change(false)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop := make(chan struct{})
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() && in.Text() != "stop" {
		}
		close(stop)
	}()
	ctx := context.Background()
	for {
		select {
		case <-stop:
			cl.Close()
			say(map[string]any{"closed": true})
			return
		default:
		}
		pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) { say(map[string]any{"value": string(r.Value)}) })
		mu.Unlock()
		if fetches.NumRecords() > 0 {
			commitCtx, cancel := context.WithTimeout(ctx, stepTimeout)
			if err := cl.CommitUncommittedOffsets(commitCtx); err != nil {
				fmt.Fprintln(os.Stderr, "commit:", err)
			}
			cancel()
		}
	}
}

// kgoProduce: the client at its defaults (idempotent, acks=all) writes N keyed records to "gt".
func kgoProduce() {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic("gt"))
	if err != nil {
		emit("kgo-produce", "send", err, nil)
		return
	}
	defer cl.Close()
	records := make([]*kgo.Record, N)
	for i := range records {
		records[i] = &kgo.Record{Key: []byte("k" + strconv.Itoa(i%31)), Value: []byte("g" + strconv.Itoa(i))}
	}
	perPartition := map[string]int{}
	results := cl.ProduceSync(ctx, records...)
	for _, r := range results {
		if r.Err == nil {
			perPartition[strconv.Itoa(int(r.Record.Partition))]++
		}
	}
	emit("kgo-produce", "send", results.FirstErr(), map[string]any{"sent": len(results), "per_partition": perPartition})
}

// pollUntil polls until want records arrived (and then quiet long enough) or the context ends.
func pollUntil(ctx context.Context, cl *kgo.Client, want int, quiet time.Duration) ([]*kgo.Record, error) {
	var got []*kgo.Record
	lastNew := time.Now()
	for {
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		for _, fe := range fetches.Errors() {
			if fe.Err != context.DeadlineExceeded && fe.Err != context.Canceled {
				return got, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		before := len(got)
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, r) })
		if len(got) != before {
			lastNew = time.Now()
		}
		if len(got) >= want && time.Since(lastNew) >= quiet {
			return got, nil
		}
		if ctx.Err() != nil {
			return got, fmt.Errorf("%d of %d records before the deadline", len(got), want)
		}
	}
}

// kgoConsume: a group consumer at its defaults (fetch sessions on) reads "gt" back and commits.
func kgoConsume() {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup("gg"), kgo.ConsumeTopics("gt"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		emit("kgo-consume", "read_and_commit", err, nil)
		return
	}
	defer cl.Close()
	got, err := pollUntil(ctx, cl, N, 0)
	if err == nil {
		err = cl.CommitUncommittedOffsets(ctx)
	}
	values := make([]string, 0, len(got))
	offsets := map[string][]int64{}
	for _, r := range got {
		values = append(values, string(r.Value))
		p := strconv.Itoa(int(r.Partition))
		offsets[p] = append(offsets[p], r.Offset)
	}
	emit("kgo-consume", "read_and_commit", err, map[string]any{"values": values, "offsets": offsets})
}

// kgoTransactions: a transactional producer commits, aborts, commits; a read_committed consumer then sees
// only the committed records.
func kgoTransactions() {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	err := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic("gx"),
			kgo.TransactionalID("gtx"))
		if err != nil {
			return err
		}
		defer cl.Close()
		rounds := []struct {
			prefix string
			commit kgo.TransactionEndTry
		}{{"c1", kgo.TryCommit}, {"a", kgo.TryAbort}, {"c2", kgo.TryCommit}}
		for _, round := range rounds {
			if err := cl.BeginTransaction(); err != nil {
				return err
			}
			for i := 0; i < 10; i++ {
				rec := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(round.prefix + "-" + strconv.Itoa(i))}
				if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					return err
				}
			}
			if err := cl.EndTransaction(ctx, round.commit); err != nil {
				return err
			}
		}
		return nil
	}()
	emit("kgo-transactions", "commit_abort_commit", err, nil)

	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics("gx"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		emit("kgo-transactions", "read_committed", err, nil)
		return
	}
	defer cl.Close()
	got, err := pollUntil(ctx, cl, 20, 1500*time.Millisecond)
	values := []string{}
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	sort.Strings(values)
	emit("kgo-transactions", "read_committed", err, map[string]any{"values": values})
}

// kgoGroupTransact: consume-transform-produce with a GroupTransactSession: reads "gt" in group "gts" and
// writes each value, prefixed "y", to "gy", one transaction per poll that also commits the group's offsets
// (AddOffsetsToTxn, TxnOffsetCommit with the member's generation).
func kgoGroupTransact() {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(bootstrap), kgo.TransactionalID("gts-tx"),
		kgo.ConsumerGroup("gts"), kgo.ConsumeTopics("gt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("gy"))
	if err != nil {
		emit("kgo-group-transact", "transform", err, nil)
		return
	}
	defer sess.Close()
	moved, transactions := 0, 0
	err = func() error {
		for moved < N {
			pollCtx, pollCancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fetches := sess.PollFetches(pollCtx)
			pollCancel()
			if ctx.Err() != nil {
				return fmt.Errorf("%d of %d records moved before the deadline", moved, N)
			}
			for _, fe := range fetches.Errors() {
				if fe.Err != context.DeadlineExceeded && fe.Err != context.Canceled {
					return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
				}
			}
			var out []*kgo.Record
			fetches.EachRecord(func(r *kgo.Record) {
				out = append(out, &kgo.Record{Key: r.Key, Value: append([]byte("y"), r.Value...)})
			})
			if len(out) == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				return err
			}
			produceErr := sess.ProduceSync(ctx, out...).FirstErr()
			committed, err := sess.End(ctx, kgo.TransactionEndTry(produceErr == nil))
			if produceErr != nil {
				return produceErr
			}
			if err != nil {
				return err
			}
			if committed {
				moved += len(out)
				transactions++
			}
		}
		return nil
	}()
	emit("kgo-group-transact", "transform", err, map[string]any{"moved": moved, "transactions": transactions})
}

// --------------------------------------------------------------------------------------------- Sarama

// saramaProduce: a SyncProducer (Sarama's defaults, plus the Return.Successes it requires) writes N
// records to "st".
func saramaProduce() {
	cfg := sarama.NewConfig()
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
	if err != nil {
		emit("sarama-produce", "send", err, nil)
		return
	}
	defer producer.Close()
	msgs := make([]*sarama.ProducerMessage, N)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: "st", Key: sarama.StringEncoder("k" + strconv.Itoa(i%31)),
			Value: sarama.StringEncoder("s" + strconv.Itoa(i))}
	}
	err = producer.SendMessages(msgs)
	perPartition := map[string]int{}
	for _, m := range msgs {
		perPartition[strconv.Itoa(int(m.Partition))]++
	}
	emit("sarama-produce", "send", err, map[string]any{"sent": len(msgs), "per_partition": perPartition,
		"version": cfg.Version.String()})
}

type groupHandler struct {
	mu     sync.Mutex
	values []string
	want   int
	done   context.CancelFunc
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		sess.MarkMessage(msg, "")
		h.mu.Lock()
		h.values = append(h.values, string(msg.Value))
		if len(h.values) >= h.want {
			sess.Commit()
			h.done()
		}
		h.mu.Unlock()
	}
	return nil
}

// saramaGroup: a consumer group (Sarama's defaults, from the oldest offset) reads "st" back and commits.
func saramaGroup() {
	cfg := sarama.NewConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	group, err := sarama.NewConsumerGroup([]string{bootstrap}, "sg", cfg)
	if err != nil {
		emit("sarama-group", "read_and_commit", err, nil)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	handler := &groupHandler{want: N, done: cancel}
	var groupErrs []string
	go func() {
		for e := range group.Errors() {
			groupErrs = append(groupErrs, e.Error())
		}
	}()
	for ctx.Err() == nil {
		if err = group.Consume(ctx, []string{"st"}, handler); err != nil {
			break
		}
	}
	closeErr := group.Close()
	if err == nil {
		err = closeErr
	}
	handler.mu.Lock()
	defer handler.mu.Unlock()
	if err == nil && len(handler.values) < N {
		err = fmt.Errorf("%d of %d records before the deadline (group errors: %v)", len(handler.values), N, groupErrs)
	}
	emit("sarama-group", "read_and_commit", err, map[string]any{"values": handler.values})
}

// ------------------------------------------------------------------------- a cluster through failures

// clusterN records "r<seq>" go to partition seq % 3 of topic $CLUSTER_TOPIC ("t").
const clusterN = 600

func clusterTopic() string {
	if topic := os.Getenv("CLUSTER_TOPIC"); topic != "" {
		return topic
	}
	return "t"
}

var stdin = bufio.NewScanner(os.Stdin)

// pause tells the driving test that the scenario reached at, waits until it injected the failure and wrote
// a line back, and returns the time the scenario resumed (recovery is measured from it).
func pause(scenario, at string) (time.Time, error) {
	emit(scenario, "pause", nil, map[string]any{"at": at})
	if !stdin.Scan() {
		return time.Time{}, fmt.Errorf("the driving test closed stdin at %s", at)
	}
	return time.Now(), nil
}

func clusterClient(opts ...kgo.Opt) (*kgo.Client, error) {
	logger := kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)
	seeds := kgo.SeedBrokers(strings.Split(bootstrap, ",")...) // every node of the cluster
	return kgo.NewClient(append([]kgo.Opt{seeds, kgo.WithLogger(logger)}, opts...)...)
}

// kgoClusterProduce: the producer at its defaults (idempotent, acks=all) sends clusterN records one at a
// time with a 1 ms pause; the test stops the leader of partition 1 a third of the way ("stop") and
// restarts it at two thirds ("start").  recovery_ms: from the resume after the stop to the first record
// acknowledged on partition 1 that was sent after it.
func kgoClusterProduce() {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var mu sync.Mutex
	var failures []error
	var firstAck, stoppedAt time.Time
	err := func() error {
		cl, err := clusterClient(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return err
		}
		defer cl.Close()
		for seq := 0; seq < clusterN; seq++ {
			afterStop := seq >= clusterN/3
			rec := &kgo.Record{Topic: clusterTopic(), Partition: int32(seq % 3), Value: []byte("r" + strconv.Itoa(seq))}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, err)
				} else if afterStop && r.Partition == 1 && firstAck.IsZero() {
					firstAck = time.Now()
				}
			})
			if seq == clusterN/3-1 {
				if stoppedAt, err = pause("kgo-cluster-produce", "stop"); err != nil {
					return err
				}
			}
			if seq == 2*clusterN/3 {
				time.Sleep(300 * time.Millisecond) // some retries happen while it is down
				if _, err = pause("kgo-cluster-produce", "start"); err != nil {
					return err
				}
			}
			time.Sleep(time.Millisecond)
		}
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if len(failures) > 0 {
			return fmt.Errorf("%d failed: %w", len(failures), failures[0])
		}
		return nil
	}()
	recovery := int64(-1)
	if !firstAck.IsZero() {
		recovery = firstAck.Sub(stoppedAt).Milliseconds()
	}
	emit("kgo-cluster-produce", "send", err, map[string]any{"sent": clusterN, "recovery_ms": recovery})
}

// kgoClusterConsume: a consumer of group "gcg" (auto-commit off) reads the topic and commits after every
// poll; half-way the test moves the group's coordinator ("move").  recovery_ms: how long the first commit
// after the move took.  Then ("resume") the test adds 30 records and a new member reads only those.
func kgoClusterConsume() {
	const s = "kgo-cluster-consume"
	read := func(want int, move bool) ([]int, int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		cl, err := clusterClient(kgo.ConsumerGroup("gcg"), kgo.ConsumeTopics(clusterTopic()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			return nil, -1, err
		}
		defer cl.Close()
		seqs := []int{}
		recovery := int64(-1)
		for len(seqs) < want && ctx.Err() == nil {
			pollCtx, pollCancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fetches := cl.PollFetches(pollCtx)
			pollCancel()
			before := len(seqs)
			fetches.EachRecord(func(r *kgo.Record) {
				seq, _ := strconv.Atoi(string(r.Value[1:]))
				seqs = append(seqs, seq)
			})
			if len(seqs) != before {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					return seqs, recovery, err
				}
			}
			if move && recovery < 0 && len(seqs) >= want/2 {
				movedAt, err := pause(s, "move")
				if err != nil {
					return seqs, recovery, err
				}
				// The committed offsets again: a commit that must reach the group's new coordinator.
				var commitErr error
				cl.CommitOffsetsSync(ctx, cl.CommittedOffsets(),
					func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
						commitErr = err
						for _, t := range resp.Topics {
							for _, p := range t.Partitions {
								if commitErr == nil && p.ErrorCode != 0 {
									commitErr = kerr.ErrorForCode(p.ErrorCode)
								}
							}
						}
					})
				if commitErr != nil {
					return seqs, recovery, commitErr
				}
				recovery = time.Since(movedAt).Milliseconds()
			}
		}
		if len(seqs) < want {
			return seqs, recovery, fmt.Errorf("%d of %d records before the deadline", len(seqs), want)
		}
		return seqs, recovery, nil
	}
	seqs, recovery, err := read(clusterN, true)
	emit(s, "read", err, map[string]any{"seqs": seqs, "recovery_ms": recovery})
	if _, err := pause(s, "resume"); err != nil {
		emit(s, "resume", err, nil)
		return
	}
	seqs, _, err = read(30, false)
	emit(s, "resume", err, map[string]any{"seqs": seqs})
}
