// Package kafkapub publishes outbox messages to Kafka with franz-go. It is
// a package of its own so that importing outbox does not pull franz-go.
package kafkapub

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sqlcoord/sqlcoord/outbox"
)

// Publisher produces to Kafka with franz-go: topic = outbox topic,
// record key = message key (so one key stays on one partition, in order),
// and the outbox id in the "outbox-id" header. The idempotent producer
// removes duplicates from its own retries; a message republished after a
// relay crash is a new record, so consumers dedupe with the Inbox on that
// header.
type Publisher struct{ Client *kgo.Client }

// New connects to the seed brokers with acks=all.
func New(brokers []string, opts ...kgo.Opt) (*Publisher, func(), error) {
	opts = append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("outbox: kafka: %w", err)
	}
	return &Publisher{Client: cl}, cl.Close, nil
}

// Publish produces the record and waits for the broker's ack.
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
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
