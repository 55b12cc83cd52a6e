package outbox

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaPublisher produces to Kafka with franz-go: topic = outbox topic,
// record key = message key (so one key stays on one partition, in order),
// and the outbox id in the "outbox-id" header. The idempotent producer
// removes duplicates from its own retries; a message republished after a
// relay crash is a new record, so consumers dedupe with the Inbox on that
// header.
type KafkaPublisher struct{ Client *kgo.Client }

// NewKafkaPublisher connects to the seed brokers with acks=all.
func NewKafkaPublisher(brokers []string, opts ...kgo.Opt) (*KafkaPublisher, func(), error) {
	opts = append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("outbox: kafka: %w", err)
	}
	return &KafkaPublisher{Client: cl}, cl.Close, nil
}

// Publish produces the record and waits for the broker's ack.
func (p *KafkaPublisher) Publish(ctx context.Context, m Message) error {
	rec := &kgo.Record{Topic: m.Topic, Value: m.Payload}
	if m.Key != "" {
		rec.Key = []byte(m.Key)
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "outbox-id", Value: []byte(m.MessageID())},
		kgo.RecordHeader{Key: "outbox-attempt", Value: []byte(strconv.Itoa(m.Attempt))})
	for k, v := range m.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return p.Client.ProduceSync(ctx, rec).FirstErr()
}
