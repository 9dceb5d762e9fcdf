package embedview_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/apierror"
	"github.com/remote-agents/remote-agents/shared/embedview"
	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/session"
)

const agentID = "0f8fad5b-d9cb-469f-a165-70867728950e"

// oneToken authorizes one token of one agent.
type oneToken struct{ tok string }

func (o oneToken) Authorize(_ context.Context, id, tok string) (session.Session, error) {
	if tok == "" {
		return session.Session{}, apierror.New(apierror.MissingToken, "A session token is required.")
	}
	if id != agentID || tok != o.tok {
		return session.Session{}, apierror.New(apierror.InvalidToken, "The session token is not valid for this agent.")
	}
	return session.Session{ID: agentID, State: session.Idle}, nil
}

// The embed URL's token is exchanged for a cookie on the page's first load
// (HttpOnly, Secure, SameSite=None, Partitioned, for that agent's page
// only), so that the page reloads without a token in its URL; without
// either, or with another agent's, the page is the error page.
func TestEmbedTokenBecomesACookie(t *testing.T) {
	t.Parallel()
	h := &embedview.Handlers{Sessions: oneToken{tok: "ras_good"}}
	page := func(query map[string]string, cookies ...string) httpapi.Response {
		t.Helper()
		res, err := h.Page(t.Context(), httpapi.Request{PathParameters: map[string]string{"id": agentID}, QueryStringParameters: query, Cookies: cookies})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := page(map[string]string{"token": "ras_good"})
	if first.StatusCode != http.StatusOK || len(first.Cookies) != 1 {
		t.Fatalf("first load: %d, cookies %v", first.StatusCode, first.Cookies)
	}
	c, err := http.ParseSetCookie(first.Cookies[0])
	if err != nil || c.Name != embedview.CookieName || c.Value != "ras_good" || c.Path != "/embed/"+agentID || !c.HttpOnly || !c.Secure ||
		c.SameSite != http.SameSiteNoneMode || !c.Partitioned || c.MaxAge <= 0 {
		t.Errorf("cookie %q (%v)", first.Cookies[0], err)
	}
	if again := page(nil, embedview.CookieName+"=ras_good"); again.StatusCode != http.StatusOK || len(again.Cookies) != 0 || !strings.Contains(again.Body, agentID) {
		t.Errorf("reload with the cookie: %d, cookies %v", again.StatusCode, again.Cookies)
	}
	for name, res := range map[string]httpapi.Response{
		"neither":        page(nil),
		"a wrong cookie": page(nil, embedview.CookieName+"=ras_bad"),
		"a wrong token":  page(map[string]string{"token": "ras_bad"}, embedview.CookieName+"=ras_good"),
	} {
		if res.StatusCode == http.StatusOK || len(res.Cookies) != 0 || !strings.Contains(res.Body, "not valid") {
			t.Errorf("%s: %d %v %.100s", name, res.StatusCode, res.Cookies, res.Body)
		}
	}
}
