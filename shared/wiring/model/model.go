// Package model builds the model function: the model gateway, a streamed
// route.
package model

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/remote-agents/remote-agents/data"
	"github.com/remote-agents/remote-agents/shared/modelapi"
	"github.com/remote-agents/remote-agents/shared/modelgateway"
	"github.com/remote-agents/remote-agents/shared/smsecrets"
	"github.com/remote-agents/remote-agents/shared/wiring"
)

// Build builds the model function. The providers' keys come from Secrets
// Manager where RA_MODEL_SECRET_<PROVIDER> names a secret (read once per cold
// start), else from the Env's KeyLookup (the process's environment); Bedrock
// calls are signed with the function's own AWS credentials.
func Build(_ context.Context, e *wiring.Env) (wiring.Function, error) {
	lookup := e.KeyLookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var keys modelgateway.FirstKey
	if len(e.Config.Model.Secrets) > 0 {
		keys = append(keys, smsecrets.New(secretsmanager.NewFromConfig(e.AWS), e.Config.Model.Secrets))
	}
	keys = append(keys, modelgateway.EnvKeys(lookup))
	prices, err := prices(e)
	if err != nil {
		return wiring.Function{}, err
	}
	caps := modelgateway.Caps{Limits: e.Limits(), DayUSD: e.Config.SessionLimits.MaxCostUSDPerDay, MonthUSD: e.Config.SessionLimits.MaxCostUSDPerMonth}
	gw := modelgateway.New(modelgateway.Options{Store: e.SessionStore(), Model: e.Config.Model, Keys: keys, Region: e.AWS.Region, Prices: prices, Caps: caps, Log: e.Log})
	return wiring.Pick("model", (&modelapi.Handlers{Gateway: gw, AWS: e.AWS, Log: e.Log, Metered: e.Metered}).Routes())
}

// prices is the price table model calls are costed by: the file the
// configuration names, else the shipped one.
func prices(e *wiring.Env) (modelgateway.Prices, error) {
	raw := data.ModelPrices
	if path := e.Config.SessionLimits.PriceTablePath; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("price table (RA_PRICE_TABLE): %w", err)
		}
		raw = b
	}
	return modelgateway.ParsePrices(raw)
}
