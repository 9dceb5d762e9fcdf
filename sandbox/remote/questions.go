package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/remote-agents/remote-agents/sandbox/toolenv"
	"github.com/remote-agents/remote-agents/sandbox/tools"
	"github.com/remote-agents/remote-agents/shared/sandboxwire"
)

// AskTool is the tool the agent asks the user a question with: the embed view
// shows the options as buttons, and the answer arrives as a user message.
const AskTool = "ask_user"

const askSchema = `{"type":"object","additionalProperties":false,"required":["question","options"],"properties":{
	"question":{"type":"string","minLength":1,"maxLength":2000},
	"options":{"type":"array","minItems":1,"maxItems":10,"items":{"type":"string","minLength":1,"maxLength":200}}}}`

// question is one the agent asked.
type question struct {
	text    string
	options map[string]string // option id → label
}

// questions are those the agent asked, to read answers against.
type questions struct {
	mu   sync.Mutex
	byID map[string]question
}

// tool registers ask_user: it appends an agent.question event and returns at once.
func (q *questions) tool(emit func(context.Context, sandboxwire.Payload) error) tools.Tool {
	return tools.Tool{
		Name:        AskTool,
		Description: "Ask the user a question with a few options to click. Returns at once; the answer arrives later as a user message. Use it when you need the user to decide.",
		Schema:      askSchema,
		Run: func(ctx context.Context, raw json.RawMessage) (string, error) {
			var in struct {
				Question string   `json:"question"`
				Options  []string `json:"options"`
			}
			if err := json.Unmarshal(raw, &in); err != nil {
				return "", err
			}
			id := "q_" + randomHex(6)
			opts := make([]sandboxwire.Option, len(in.Options))
			labels := map[string]string{}
			for i, label := range in.Options {
				oid := "o" + strconv.Itoa(i+1)
				opts[i] = sandboxwire.Option{ID: oid, Label: label}
				labels[oid] = label
			}
			q.mu.Lock()
			if q.byID == nil {
				q.byID = map[string]question{}
			}
			q.byID[id] = question{text: in.Question, options: labels}
			q.mu.Unlock()
			if err := emit(ctx, sandboxwire.AgentQuestion{QuestionID: id, Text: in.Question, Options: opts}); err != nil {
				return "", fmt.Errorf("the question could not be shown: %w", err)
			}
			return "Asked the user (question " + id + "). Their answer will arrive as a message; end your turn now.", nil
		},
	}
}

// text is what the model reads for an inbox message: its text, what the user
// answered, and where its attachments were saved.
func (q *questions) text(m sandboxwire.InboxMessage, saved []string) string {
	var parts []string
	if a := m.Answer; a != nil {
		q.mu.Lock()
		asked, ok := q.byID[a.QuestionID]
		q.mu.Unlock()
		label := asked.options[a.OptionID]
		switch {
		case ok && label != "":
			parts = append(parts, fmt.Sprintf("The user answered your question %q: %s", asked.text, label))
		default:
			parts = append(parts, fmt.Sprintf("The user picked option %s of question %s.", a.OptionID, a.QuestionID))
		}
	}
	if strings.TrimSpace(m.Text) != "" {
		parts = append(parts, m.Text)
	}
	if len(saved) > 0 {
		parts = append(parts, "The user attached: "+strings.Join(saved, ", ")+" (in the workspace).")
	}
	return strings.Join(parts, "\n\n")
}

// AttachmentsDir is the workspace folder the user's attachments are saved in.
const AttachmentsDir = "attachments"

// maxAttachment bounds a download.
const maxAttachment = 25 << 20

// download saves a message's attachments under attachments/ in the workspace,
// given to the tools' user u (if any), and returns their workspace paths.
func download(ctx context.Context, workspace string, m sandboxwire.InboxMessage, u *toolenv.User) ([]string, error) {
	var saved []string
	client := &http.Client{Timeout: 5 * time.Minute}
	for _, a := range m.Attachments {
		name := filepath.Base(a.Name)
		if name == "." || name == ".." || name == "/" {
			return saved, errors.New("an attachment has no usable name")
		}
		rel := filepath.Join(AttachmentsDir, strconv.FormatInt(m.Seq, 10)+"-"+name)
		dst := filepath.Join(workspace, rel)
		existed := toolenv.FirstExisting(filepath.Dir(dst))
		if err := fetch(ctx, client, a.URL, dst); err != nil {
			return saved, err
		}
		if err := u.OwnCreated(existed, dst); err != nil {
			return saved, err
		}
		saved = append(saved, filepath.ToSlash(rel))
	}
	return saved, nil
}

func fetch(ctx context.Context, client *http.Client, url, dst string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return errors.New("the attachment could not be downloaded")
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the attachment could not be downloaded (%d)", res.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(res.Body, maxAttachment+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxAttachment {
		err = fmt.Errorf("the attachment is larger than %d MB", maxAttachment>>20)
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
