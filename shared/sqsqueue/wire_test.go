package sqsqueue_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/remote-agents/remote-agents/shared/queue"
	"github.com/remote-agents/remote-agents/shared/sqsqueue"
)

// fakeSQS speaks the SQS JSON protocol for SendMessageBatch: entries whose body
// starts with "fail" are reported in Failed, a batch holding "reject" fails whole.
func fakeSQS(t *testing.T) *sqs.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("X-Amz-Target"); got != "AmazonSQS.SendMessageBatch" {
			t.Errorf("unexpected call %q", got)
		}
		var in struct {
			Entries []struct{ Id, MessageBody string }
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		type ok struct{ Id, MessageId, MD5OfMessageBody string }
		type failed struct {
			Id, Code, Message string
			SenderFault       bool
		}
		var out struct {
			Successful []ok
			Failed     []failed
		}
		for _, e := range in.Entries {
			if e.MessageBody == "reject" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"rejected"}`))
				return
			}
			if strings.HasPrefix(e.MessageBody, "fail") {
				out.Failed = append(out.Failed, failed{Id: e.Id, Code: "InternalError", Message: "try again"})
				continue
			}
			sum := md5.Sum([]byte(e.MessageBody))
			out.Successful = append(out.Successful, ok{Id: e.Id, MessageId: "m-" + e.Id, MD5OfMessageBody: hex.EncodeToString(sum[:])})
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
}

func TestSendBatchMergesServerFailures(t *testing.T) {
	t.Parallel()
	q := sqsqueue.New(fakeSQS(t), "http://queue.local/000000000000/jobs")
	entries := []queue.Entry{
		{ID: "a", Body: "ok"}, {ID: "b", Body: "fail me"}, {ID: "c", Body: "ok"},
		{ID: "d", Body: "ok"}, {ID: "e", Body: "ok"}, {ID: "f", Body: "ok"},
		{ID: "g", Body: "ok"}, {ID: "h", Body: "ok"}, {ID: "i", Body: "ok"},
		{ID: "j", Body: "ok"},                            // first request ends here
		{ID: "k", Body: "reject"}, {ID: "l", Body: "ok"}, // second request fails whole
	}
	failures, err := q.SendBatch(t.Context(), entries)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]queue.Failure{}
	var ids []string
	for _, f := range failures {
		byID[f.ID] = f
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "b,k,l" {
		t.Fatalf("failed ids = %v, want b,k,l", ids)
	}
	if f := byID["b"]; f.Code != "InternalError" || f.SenderFault {
		t.Errorf("server failure = %+v", f)
	}
	if f := byID["l"]; f.Code != sqsqueue.CodeRequestFailed {
		t.Errorf("whole-request failure = %+v", f)
	}
}
