// Package toolcallback builds the toolcallback function: the
// gateway-mediated tools the sandbox calls back.
package toolcallback

import (
	"context"

	"github.com/remote-agents/remote-agents/shared/toolapi"
	"github.com/remote-agents/remote-agents/shared/wiring"
	"github.com/remote-agents/remote-agents/shared/wiring/toolservice"
)

// Build builds the toolcallback function.
func Build(ctx context.Context, e *wiring.Env) (wiring.Function, error) {
	gate, err := toolservice.New(ctx, e)
	if err != nil {
		return wiring.Function{}, err
	}
	return wiring.Pick("toolcallback", (&toolapi.Handlers{Gate: gate, Log: e.Log}).Routes())
}
