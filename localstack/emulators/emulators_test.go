package emulators_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/remote-agents/remote-agents/localstack/emulators"
)

func TestStartServesAndStopLeavesNoProcess(t *testing.T) {
	emu, err := emulators.Start(t.Context(), emulators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Stop() })

	for _, url := range []string{emu.DynamoDB, emu.SQS, emu.S3} {
		if !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Errorf("endpoint %q is not on loopback", url)
		}
		res, err := http.Get(url)
		if err != nil {
			t.Errorf("GET %s: %v", url, err)
			continue
		}
		_ = res.Body.Close()
	}
	env := strings.Join(emu.Env(), "\n")
	for _, want := range []string{"AWS_ENDPOINT_URL_DYNAMODB=" + emu.DynamoDB, "AWS_ENDPOINT_URL_SQS=" + emu.SQS, "AWS_ENDPOINT_URL_S3=" + emu.S3} {
		if !strings.Contains(env, want) {
			t.Errorf("Env() lacks %s", want)
		}
	}

	pids := emu.Pids()
	if err := emu.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := emu.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	for _, pid := range pids {
		// Signal 0 probes: ESRCH means no such process (nor a zombie: Wait reaped it).
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop (%v)", pid, err)
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still exists after Stop (%v)", pid, err)
		}
	}
}

// goaws alone crashes ("concurrent map read and map write") when a queue is created
// while others are used; behind the front it takes any mix, and a long poll neither
// holds a creation back nor misses its message.
func TestSQSTakesQueuesCreatedWhileOthersAreInUse(t *testing.T) {
	emu, err := emulators.Start(t.Context(), emulators.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Stop() })
	ctx := t.Context()
	client := sqs.New(sqs.Options{
		Region:           emulators.Region,
		BaseEndpoint:     aws.String(emu.SQS),
		Credentials:      credentials.NewStaticCredentialsProvider(emulators.AccessKeyID, emulators.SecretAccessKey, ""),
		RetryMaxAttempts: 1,
	})
	create := func(name string) (*string, error) {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		if err != nil {
			return nil, err
		}
		return out.QueueUrl, nil
	}

	polled, err := create("polled")
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan []types.Message, 1)
	go func() {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: polled, WaitTimeSeconds: 20})
		if err != nil {
			t.Errorf("long poll: %v", err)
			received <- nil
			return
		}
		received <- out.Messages
	}()

	const workers, rounds = 16, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				name := fmt.Sprintf("q-%d-%d", w, i)
				url, err := create(name)
				if err == nil {
					_, err = client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
				}
				if err == nil {
					_, err = client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(name)})
				}
				if err == nil {
					_, err = client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
				}
				if err != nil {
					t.Errorf("queue %s: %v", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: polled, MessageBody: aws.String("last")}); err != nil {
		t.Fatal(err)
	}
	msgs := <-received
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != "last" {
		t.Fatalf("long poll got %d messages (%v), want the one sent after the others' creations", len(msgs), msgs)
	}
	list, err := client.ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(list.QueueUrls); got != workers*rounds+1 {
		t.Errorf("%d queues listed, want %d", got, workers*rounds+1)
	}
}
