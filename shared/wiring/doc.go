// Package wiring holds what every Lambda function of the system is built
// from: the Env (configuration, the AWS configuration, resource names, the
// logger, and the clients and stores every function may ask for, built on
// first use, once), the Function a constructor builds, and Lambda, which
// builds one at cold start for lambda.Start.
//
// Each function's constructor lives in a package of its own under
// shared/wiring/<function> (named as in package routes), which imports only
// what that function serves: functions/<name>/main.go is one call to Lambda
// with it, and the dev server calls the same constructors (package
// functionset), so the two cannot drift, and a Lambda binary links no other
// route's code. What several functions but not all share is built by the
// packages shared/wiring/jobservice, poolservice and toolservice, which keep
// what they build in the Env (Once).
//
// A function that never asks for a queue resolves no queue URL at its cold
// start.
package wiring
