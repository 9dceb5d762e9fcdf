// Package wiring builds each Lambda function of the system from only what that
// function uses: one constructor per function, named as in package routes.
// functions/<name>/main.go is one call to Lambda with the function's
// constructor and lambda.Start; the dev server calls the same constructors, so
// the two cannot drift.
//
// An Env holds what every function starts from (configuration, the AWS
// configuration, resource names, the logger) and builds the clients, stores,
// queues and services a constructor asks for on first use, once. A function
// that never asks for a queue resolves no queue URL at its cold start.
package wiring
