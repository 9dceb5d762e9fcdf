// Package data holds the platform's shipped data files that code reads: the
// default model price table (model-prices.json). The guardrails document
// beside it is read from its path (or object) at run time.
package data

import _ "embed"

// ModelPrices is the default price table (see modelgateway.Prices).
//
//go:embed model-prices.json
var ModelPrices []byte
