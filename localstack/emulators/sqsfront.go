package emulators

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sqsFront serves SQS in front of goaws. goaws v0.5.4 writes its map of queues under a
// lock in CreateQueue and DeleteQueue but reads it without one at the start of most
// other actions (GetQueueUrl, SendMessage, ReceiveMessage, ...), so a queue created
// while another is used can crash it: "fatal error: concurrent map read and map write".
// The front runs those two actions alone and every other action beside each other.
//
// A long poll would hold out a CreateQueue for up to 20 seconds, so the front polls for
// it instead: it asks goaws without waiting, and again after each message sent through
// it or every pollEvery (messages also come back when their visibility times out),
// until one arrives or the wait is over.
type sqsFront struct {
	backend string // goaws's base URL
	client  *http.Client

	queues sync.RWMutex // held alone by CreateQueue and DeleteQueue

	sentMu sync.Mutex
	sent   chan struct{} // closed, and replaced, when a message is sent
}

// pollEvery is how often a long poll asks goaws again when nothing was sent: goaws's
// own long poll looks every 100 ms.
const pollEvery = 100 * time.Millisecond

// maxSQSRequest bounds a request the front reads: well above SQS's largest (a batch
// of messages up to 1 MiB, with attributes and JSON escaping).
const maxSQSRequest = 4 << 20

func newSQSFront(backend string) *sqsFront {
	return &sqsFront{backend: backend, client: &http.Client{}, sent: make(chan struct{})}
}

func (f *sqsFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSQSRequest+1))
	if err != nil || len(body) > maxSQSRequest {
		http.Error(w, "request unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	action := sqsAction(r, body)
	switch action {
	case "CreateQueue", "DeleteQueue":
		f.queues.Lock()
		res := f.forward(r, body)
		f.queues.Unlock()
		res.write(w)
		return
	case "ReceiveMessage":
		if wait, short, ok := shortPoll(r, body); ok && wait > 0 {
			f.poll(r, short, wait).write(w)
			return
		}
	}
	f.queues.RLock()
	res := f.forward(r, body)
	f.queues.RUnlock()
	if res.status == http.StatusOK && (action == "SendMessage" || action == "SendMessageBatch" || action == "ChangeMessageVisibility") {
		f.wake()
	}
	res.write(w)
}

// poll asks goaws for messages without waiting until some come or wait is over.
func (f *sqsFront) poll(r *http.Request, body []byte, wait time.Duration) response {
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		sent := f.sentSignal()
		f.queues.RLock()
		res := f.forward(r, body)
		f.queues.RUnlock()
		if res.status != http.StatusOK || hasMessages(res.body) {
			return res
		}
		select {
		case <-ctx.Done():
			return res
		case <-sent:
		case <-tick.C:
		}
	}
}

func (f *sqsFront) sentSignal() <-chan struct{} {
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	return f.sent
}

func (f *sqsFront) wake() {
	f.sentMu.Lock()
	defer f.sentMu.Unlock()
	close(f.sent)
	f.sent = make(chan struct{})
}

// response is goaws's answer, read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (res response) write(w http.ResponseWriter) {
	for k, v := range res.header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
}

// forward sends the request to goaws with body, under the caller's context: a client
// that goes away cancels it. When goaws cannot be reached the answer is a 502.
func (f *sqsFront) forward(r *http.Request, body []byte) response {
	// The host is goaws's, fixed at start; only the path and query are the caller's.
	req, err := http.NewRequestWithContext(r.Context(), r.Method, f.backend+r.URL.RequestURI(), bytes.NewReader(body)) //nolint:gosec // see above
	if err != nil {
		return gatewayError(err)
	}
	req.Header = r.Header.Clone()
	res, err := f.client.Do(req) //nolint:gosec // see above
	if err != nil {
		return gatewayError(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return gatewayError(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func gatewayError(err error) response {
	return response{
		status: http.StatusBadGateway,
		header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		body:   []byte("emulators: SQS front: " + err.Error() + "\n"),
	}
}

// sqsAction names the action of a request in the JSON protocol (X-Amz-Target:
// AmazonSQS.<Action>) or the query protocol (Action=<Action>).
func sqsAction(r *http.Request, body []byte) string {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		_, action, _ := strings.Cut(target, ".")
		return action
	}
	if action := r.URL.Query().Get("Action"); action != "" {
		return action
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		for _, pair := range strings.Split(string(body), "&") {
			if v, ok := strings.CutPrefix(pair, "Action="); ok {
				return v
			}
		}
	}
	return ""
}

// shortPoll returns a JSON-protocol ReceiveMessage's wait and its body asking not to
// wait. ok is false for a body it cannot read, which goaws then answers as it is.
func shortPoll(r *http.Request, body []byte) (wait time.Duration, short []byte, ok bool) {
	if r.Header.Get("X-Amz-Target") == "" {
		return 0, nil, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return 0, nil, false
	}
	var seconds int
	if raw, found := fields["WaitTimeSeconds"]; found {
		if err := json.Unmarshal(raw, &seconds); err != nil {
			return 0, nil, false
		}
	}
	// goaws then waits the queue's ReceiveMessageWaitTimeSeconds, which goawsYAML
	// sets to 0 and the bootstrap leaves alone.
	fields["WaitTimeSeconds"] = json.RawMessage("0")
	short, err := json.Marshal(fields)
	if err != nil {
		return 0, nil, false
	}
	return time.Duration(seconds) * time.Second, short, true
}

// hasMessages reports whether a JSON ReceiveMessage answer carries any message.
func hasMessages(body []byte) bool {
	var answer struct {
		Messages []json.RawMessage
	}
	return json.Unmarshal(body, &answer) == nil && len(answer.Messages) > 0
}
