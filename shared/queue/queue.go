// Package queue defines the message queue the system's work travels on (jobs,
// tool work): at-least-once delivery, visibility timeouts, dead-lettering. It holds
// types and the interface only; sqsqueue implements it on Amazon SQS.
package queue

import (
	"context"
	"errors"
	"time"
)

// Limits of one message and one batch, as SQS sets them.
const (
	MaxBodyBytes  = 256 * 1024
	MaxBatchSize  = 10
	MaxBatchBytes = 256 * 1024
	MaxWait       = 20 * time.Second
	MaxReceive    = 10
)

// ErrInvalidMessage: a message body is empty, too large, or holds characters a
// queue cannot carry. Nothing was sent.
var ErrInvalidMessage = errors.New("invalid message")

// Entry is one message to send in a batch. ID is unique within the batch and is how
// failures are reported back.
type Entry struct {
	ID    string
	Body  string
	Delay time.Duration
}

// Failure is a batch entry that was not sent.
type Failure struct {
	ID      string
	Code    string
	Message string
	// SenderFault is true when resending the same entry would fail again.
	SenderFault bool
}

// Message is a received message. It stays invisible to other receivers until its
// visibility timeout passes; Delete it once handled.
type Message struct {
	ID            string
	Body          string
	ReceiptHandle string
	// ReceiveCount is how many times it has been received, this time included.
	ReceiveCount int
}

// Queue sends and receives messages on one queue.
type Queue interface {
	// Send enqueues body after delay and returns the message id. It returns
	// ErrInvalidMessage for a body the queue cannot carry.
	Send(ctx context.Context, body string, delay time.Duration) (string, error)
	// SendBatch enqueues entries in as many requests as the batch limits need and
	// returns the entries that were not sent; every other entry was. An error means
	// the call itself was unusable (e.g. duplicate entry ids), not one entry.
	SendBatch(ctx context.Context, entries []Entry) ([]Failure, error)
	// Receive waits up to wait (at most MaxWait) for up to max (1..MaxReceive) messages.
	Receive(ctx context.Context, max int, wait time.Duration) ([]Message, error)
	// Delete removes a received message by its receipt handle.
	Delete(ctx context.Context, receiptHandle string) error
	// ChangeVisibility makes a received message visible again after d (0: now).
	ChangeVisibility(ctx context.Context, receiptHandle string, d time.Duration) error
}
