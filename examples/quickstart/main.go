// Command quickstart is the Go client's quick start: it creates an agent on a
// Remote Agents deployment (`make dev` by default), prints the agent's embed
// URL, sends it a message, prints the agent's events until its answer, and
// shuts it down.
//
//	make dev    # in another terminal
//	go run ./examples/quickstart
//
// -url (default http://127.0.0.1:8080) and -app-key (default make dev's
// development key, ra_dev_app_key) say where and as whom.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/remote-agents/remote-agents/client"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the deployment's base URL")
	appKey := flag.String("app-key", "ra_dev_app_key", "the app's key")
	question := flag.String("message", "What can you do?", "the message to send")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *url, *appKey, *question); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, baseURL, appKey, question string) error {
	c, err := client.New(baseURL, appKey)
	if err != nil {
		return err
	}
	// Create waits until the agent is ready (retrying with its Idempotency-Key
	// while the agent is still starting).
	agent, err := c.Create(ctx, client.CreateRequest{ProjectName: "demo", PersonaSlug: "assistant", InitialPrompt: "Hello!"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Agent %s is ready.\nEmbed it: %s\n\n", agent.AgentID, agent.EmbedURL)
	defer func() {
		// The agent is shut down even if ctx ended.
		res, err := c.Shutdown(context.WithoutCancel(ctx), agent.AgentID, agent.SessionToken)
		if err != nil {
			fmt.Fprintln(out, "shutdown:", err)
			return
		}
		fmt.Fprintf(out, "\nShutdown: %s\n", res.Status)
	}()

	// The events from the first: the workspace being prepared, the answer to
	// the initial prompt, then our question (a user.message with our
	// client_message_id, sent once the first answer is in) and its answer. A
	// dropped stream is resumed where it stopped.
	var sent *client.MessageReceipt
	ours := false
	for ev, err := range c.Events(ctx, agent.AgentID, agent.SessionToken) {
		if err != nil {
			return err
		}
		switch ev.Type {
		case client.EventUserMessage:
			var m struct {
				Text            string `json:"text"`
				ClientMessageID string `json:"client_message_id"`
			}
			if err := ev.Decode(&m); err != nil {
				return err
			}
			ours = ours || (sent != nil && m.ClientMessageID == sent.ClientMessageID)
			fmt.Fprintf(out, "[%d] you: %s\n", ev.Seq, m.Text)
		case client.EventAgentMessage:
			fmt.Fprintf(out, "[%d] agent: %s\n", ev.Seq, ev.Text())
			if ours {
				return nil // the answer to our message
			}
			if sent == nil { // the answer to the initial prompt: now our question
				if sent, err = c.SendMessage(ctx, agent.AgentID, agent.SessionToken, client.Message{Text: question}); err != nil {
					return err
				}
			}
		case client.EventToolCall:
			var call struct {
				Tool string `json:"tool"`
			}
			_ = ev.Decode(&call)
			fmt.Fprintf(out, "[%d] tool: %s\n", ev.Seq, call.Tool)
		default:
			data, _ := json.Marshal(ev.Data)
			fmt.Fprintf(out, "[%d] %s %s\n", ev.Seq, ev.Type, data)
		}
	}
	return fmt.Errorf("the agent ended before answering")
}
