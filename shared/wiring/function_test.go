package wiring_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/remote-agents/remote-agents/shared/httpapi"
	"github.com/remote-agents/remote-agents/shared/routes"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

func handle(method, pattern string) httpapi.Route {
	return httpapi.Route{Method: method, Pattern: pattern, Handler: func(context.Context, httpapi.Request) (httpapi.Response, error) { return httpapi.Response{}, nil }}
}

// TestPickHoldsHandlersToTheTable: a function takes exactly its routes of the
// table, fails on one it has no handler for, and fails on a handler route the
// table lacks, so a path is named in the table or served nowhere.
func TestPickHoldsHandlersToTheTable(t *testing.T) {
	alive := handle(http.MethodGet, routes.PathAlive)
	shutdown := handle(http.MethodPost, routes.PathShutdown)

	f, err := wiring.Pick("alive", []httpapi.Route{alive, shutdown})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Routes) != 1 || f.Routes[0].Key() != "GET "+routes.PathAlive {
		t.Errorf("alive serves %v, want only GET %s", f.Routes, routes.PathAlive)
	}

	if _, err := wiring.Pick("alive", []httpapi.Route{shutdown}); err == nil || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("alive without its handler: %v, want a missing handler", err)
	}

	extra := handle(http.MethodGet, "/api/remote_agents/{id}/secret")
	if _, err := wiring.Pick("alive", []httpapi.Route{alive, extra}); err == nil || !strings.Contains(err.Error(), "not in the route table") {
		t.Errorf("a handler route outside the table: %v, want it refused", err)
	}
}
