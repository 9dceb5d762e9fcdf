// Package access declares what each Lambda function may do to the system's data:
// per table, the DynamoDB actions, and for some tables the items (by partition
// key prefix) they are limited to; the queues it sends to; the object key
// patterns it reads or writes (presigned URLs included: they carry the
// function's permissions); the key prefixes it lists; whether it launches
// sandboxes. The CDK stack grants exactly this and nothing more, and the dev
// server's tests record every AWS call each function's code makes and fail on
// any this does not allow: the grants cannot drift from the code either way
// unnoticed.
package access

import (
	"regexp"
	"slices"
	"strings"
)

// IAM actions.
const (
	GetItem      = "dynamodb:GetItem"
	PutItem      = "dynamodb:PutItem"
	UpdateItem   = "dynamodb:UpdateItem"
	DeleteItem   = "dynamodb:DeleteItem"
	Query        = "dynamodb:Query"
	GetObject    = "s3:GetObject"
	PutObject    = "s3:PutObject"
	DeleteObject = "s3:DeleteObject"
)

// Resources, by the name they have after the environment prefix "ra-<env>-".
const (
	Sessions    = "sessions"
	Events      = "events"
	Idempotency = "idempotency"
	Registry    = "registry"
	Jobs        = "jobs"
	JobsQueue   = "jobs"
	JobsDLQ     = "jobs-dlq"
	ToolsQueue  = "tools"
	ToolsDLQ    = "tools-dlq"
	// WebhooksQueue carries webhook deliveries; WebhooksDLQ what failed for
	// a day.
	WebhooksQueue = "webhooks"
	WebhooksDLQ   = "webhooks-dlq"
	// JobEventsBus is the jobs' event bus (jobevents.BusName), and
	// OrchestratorQueue the queue its rule forwards the events to.
	JobEventsBus      = "jobs"
	OrchestratorQueue = "orchestrator"
)

// GuardrailsKey is where the guardrails document is deployed in the bucket.
const GuardrailsKey = "platform/platform-guardrails.md"

// Partition key prefixes of items (package dynamo's keys).
const (
	// ConfigurationItems starts the key of every configuration in the
	// registry (never an app key, project or persona).
	ConfigurationItems = "configuration#"
	// RunItems starts the key of every automation run record in the jobs table.
	RunItems = "run#"
	// AgentTypeItems starts the key of every agent type in the registry
	// ("agent_type#<tenant>#<id>"), and is the by_kind index's partition key
	// of agent types ("agent_type"), which their list queries.
	AgentTypeItems = "agent_type"
	// AppKeyItems starts the key of every app key in the registry.
	AppKeyItems = "app_key#"
	// AppKeyKind is the by_kind index's partition of the app keys: listed
	// by kind, not read by key.
	AppKeyKind = "app_key"
	// AgentProfileItems starts the key of every agent profile in the
	// registry, and is the by_kind index's key of their list.
	AgentProfileItems = "agent_profile"
	// WebhookEndpointItems starts the key of an app's webhook endpoints
	// ("webhooks#<tenant>"); WebhookItems of an endpoint's cursors and
	// delivery log ("webhook#<endpoint>"), in the registry.
	WebhookEndpointItems = "webhooks#"
	WebhookItems         = "webhook#"
	// PoolItems starts the key of every warm pool item in the registry
	// ("pool#<id>", "poollock#<type>"), and is the by_kind index's key of
	// the pool sandboxes' list ("pool").
	PoolItems = "pool"
	// AddressOfItems starts the key of the record of where each running
	// sandbox is ("sandbox_addr_of#<sandbox>", package dynamo's Addresses):
	// the only items of the idempotency table the sandbox proxy reads.
	AddressOfItems = "sandbox_addr_of#"
)

// JobItems start the keys of the orchestrator jobs' items in the jobs table
// (package dynamo's Jobs): jobs, plan step claims, the outbox, the running.
var JobItems = []string{"job#", "step#", "outbox", "running"}

// jobsTable is what moves jobs along (the job service): jobs, their outbox.
var jobsTable = []string{GetItem, PutItem, UpdateItem, DeleteItem, Query}

// ConfigurationEnv is the pattern of the objects holding the env values
// persisted for configurations (session.ConfigurationEnvKey), written only
// with server-side encryption.
const ConfigurationEnv = "configurations/*/*/env.json"

// Access is one function's access.
type Access struct {
	Tables  map[string][]string
	Send    []string
	Objects map[string][]string
	List    []string
	Launch  bool
	// Models: the function calls the model providers for sandboxes: it reads
	// the secrets holding their API keys (RA_MODEL_SECRET_<PROVIDER>) and
	// invokes Bedrock models with its own role.
	Models bool
	// Push: the function pushes to sandboxes over their push connections
	// (execute-api:ManageConnections on the WebSocket API's @connections).
	Push bool
	// Streams are the tables whose streams the function reads (its event
	// source mapping's, StreamActions).
	Streams []string
	// PublishJobEvents: the function publishes the orchestrator jobs' events
	// (events:PutEvents on JobEventsBus, and nothing else of EventBridge). On
	// the bundled emulators, which have no EventBridge, the same publisher
	// sends to OrchestratorQueue instead; the dev server allows that send
	// and the stack grants none (on AWS the rule sends).
	PublishJobEvents bool

	// LeadingKeys limits the function, on a table it names, to the items whose
	// partition key starts with one of the prefixes (IAM's
	// dynamodb:LeadingKeys); on other tables it is not limited by item.
	LeadingKeys map[string][]string
	// IndexKeys are index partitions (exact partition key values) the
	// function may also query on a table LeadingKeys limits, and nothing
	// else of: the items listed there are not its to read by key.
	IndexKeys map[string][]string
	// WriteKeys limits the function's writes (PutItem, UpdateItem,
	// DeleteItem) on a table it names to the items whose partition key starts
	// with one of the prefixes; its reads there are not limited by item.
	WriteKeys map[string][]string
}

// toolWrites is what the gateway tools write besides sessions: the
// configuration of a setup session, a run's completion. Nothing else of the
// registry (app keys least of all) and of the jobs table.
var toolWrites = map[string][]string{Registry: {ConfigurationItems}, Jobs: {RunItems}}

// workerWrites are the worker's: the tools', and the jobs' items.
var workerWrites = map[string][]string{Registry: {ConfigurationItems}, Jobs: append([]string{RunItems}, JobItems...)}

// workerKeys are the worker's items: its writes', the warm pool's, the
// agent types and the job profiles (which keep a pool; a job's profile
// says whether it starts in one).
var workerKeys = map[string][]string{Registry: {ConfigurationItems, PoolItems, AgentTypeItems, AgentProfileItems}, Jobs: workerWrites[Jobs]}

var worker = Access{
	Tables: map[string][]string{
		// A job's sandbox gets its session here (job.run).
		Sessions: {GetItem, PutItem, UpdateItem},
		Events:   {PutItem},
		// A tool's output event is appended once per call, with a record;
		// a running sandbox task's address is recorded, and forgotten at its
		// stop (sandbox_addr#, sandbox_addr_of#).
		Idempotency: {GetItem, PutItem, UpdateItem, DeleteItem},
		// The warm pool's sandboxes are registered, claimed, retired; the
		// types that keep one listed.
		Registry: {GetItem, PutItem, UpdateItem, DeleteItem, Query},
		Jobs:     jobsTable,
	},
	// A sandbox's end further off than a queue delays is sent on.
	Send: []string{JobsQueue, JobsDLQ, ToolsDLQ},
	// The guardrails' hash: a pool sandbox of older ones is retired.
	// An ended agent's checkpoints are deleted.
	Objects: map[string][]string{"sessions/*/tools/*": {GetObject}, "snapshots/*": {PutObject}, GuardrailsKey: {GetObject}, "checkpoints/*": {DeleteObject}},
	List:    []string{"sessions/", "checkpoints/"},
	Launch:  true,
	// The orchestrator jobs' transitions (issue 17); the jobs function, which
	// creates and cancels them, sets it too.
	PublishJobEvents: true,
	// A warm sandbox is told of its claim over its push connection.
	Push: true,

	LeadingKeys: workerKeys,
	// The app keys listed by kind: the tenants whose live counts the sweep
	// checks.
	IndexKeys: map[string][]string{Registry: {AppKeyKind}},
}

var table = map[string]Access{
	"create": {
		Tables: map[string][]string{
			Sessions: {GetItem, PutItem, UpdateItem, Query},
			// The live sessions and creates-a-minute quotas' counters, moved
			// in the create's transaction.
			Idempotency: {GetItem, PutItem, UpdateItem},
			Registry:    {GetItem},
			// An app's agent's stream starts with agent.created; a create
			// that fails records agent.failed.
			Events: {PutItem},
		},
		Send: []string{JobsQueue},
		Objects: map[string][]string{
			GuardrailsKey: {GetObject},
			// A fork copies its source's checkpoint (and deletes the copy
			// of a fork its quota refused).
			"checkpoints/*": {GetObject, PutObject, DeleteObject},
		},
		// Checkpoints pruned; a resumed session's env submissions read
		// back.
		List: []string{"checkpoints/", "sessions/"},
	},
	// Agent types: app keys read, agent types read, created, listed (the
	// by_kind index) and changed; nothing else of the registry. Webhook
	// endpoints (with their signing secrets) and their delivery log; a
	// replay's agent read, an app's agents listed; replays queued.
	"agenttypes": {
		Tables: map[string][]string{Registry: {GetItem, PutItem, UpdateItem, DeleteItem, Query}, Sessions: {GetItem, Query}},
		// A type's warm pool is counted (the by_kind index's "pool").
		LeadingKeys: map[string][]string{Registry: {AgentTypeItems, AppKeyItems, PoolItems, WebhookEndpointItems, WebhookItems}},
		Send:        []string{WebhooksQueue},
	},
	// Webhooks: the events table's stream read (StreamActions), a trigger
	// per agent queued; each delivery reads the agent's session and
	// events, its app's endpoints, moves their cursors, writes their log;
	// an endpoint that answers 410 is disabled; what failed for a day goes
	// to the DLQ.
	"webhooks": {
		Tables: map[string][]string{
			Sessions: {GetItem},
			Events:   {Query},
			Registry: {GetItem, PutItem, UpdateItem, Query},
		},
		LeadingKeys: map[string][]string{Registry: {WebhookEndpointItems, WebhookItems}},
		Send:        []string{WebhooksQueue, WebhooksDLQ},
		Streams:     []string{Events},
	},
	"alive": {
		// A session that ends gives its live slot back (a counter in the
		// idempotency table, moved in the same transaction): so for every
		// function that ends sessions; and records agent.ended (an event).
		Tables:  map[string][]string{Sessions: {GetItem, UpdateItem}, Idempotency: {UpdateItem}, Events: {PutItem}},
		Send:    []string{JobsQueue},
		Objects: map[string][]string{GuardrailsKey: {GetObject}},
		// Whoever appends an event pushes it to the agent's viewers.
		Push: true,
	},
	"shutdown": {
		Tables: map[string][]string{
			Sessions: {GetItem, UpdateItem},
			// A push connection found gone: its session is looked up; the
			// live slot given back.
			Idempotency: {GetItem, UpdateItem},
			// An agent that ends records agent.ended.
			Events: {PutItem},
		},
		Send: []string{JobsQueue},
		Push: true,
	},
	// The fleet: an app's sessions listed from the by_tenant index, a session
	// killed; app keys read, nothing else of the registry.
	"fleet": {
		// An app key's own limits, set by the app (its item, by the hash of
		// the key it called with).
		// A killed agent records agent.ended.
		Tables:      map[string][]string{Sessions: {GetItem, UpdateItem, Query}, Registry: {GetItem, UpdateItem}, Idempotency: {GetItem, UpdateItem}, Events: {PutItem}},
		LeadingKeys: map[string][]string{Registry: {AppKeyItems}},
		Send:        []string{JobsQueue},
		// A killed agent's sandbox is told at once; a gone connection's
		// session is looked up.
		Push: true,
		// An agent's checkpoints, listed and read (pause, resume).
		Objects: map[string][]string{"checkpoints/*": {GetObject}},
		List:    []string{"checkpoints/"},
	},
	// The sandbox API: a create's (the agent type read, the quotas'
	// counters moved, the start and the expiry queued) and the fleet's
	// (kill, pause, resume, the app's sessions listed); a sandbox's end
	// set. The envd token key is read (RA_E2B_TOKEN_SECRET).
	"e2b": {
		Tables: map[string][]string{
			Sessions:    {GetItem, PutItem, UpdateItem, Query},
			Idempotency: {GetItem, PutItem, UpdateItem},
			Registry:    {GetItem},
			Events:      {PutItem},
		},
		Send:    []string{JobsQueue},
		Push:    true,
		Objects: map[string][]string{GuardrailsKey: {GetObject}, "checkpoints/*": {GetObject}},
		List:    []string{"checkpoints/", "sessions/"},
	},
	"messages": {
		Tables: map[string][]string{
			Sessions:    {GetItem, UpdateItem},
			Events:      {PutItem},
			Idempotency: {GetItem, PutItem},
		},
		Objects: map[string][]string{
			"sessions/*/env/*":         {PutObject},
			"sessions/*/attachments/*": {PutObject},
			// Persisted env values: read, merged, written back (sealed).
			ConfigurationEnv: {GetObject, PutObject},
		},
		Push: true,
		// A message resumes a paused agent whose type says so.
		Send: []string{JobsQueue},
	},
	"events": {
		// The open streams quota: each stream recorded on its session.
		Tables: map[string][]string{Sessions: {GetItem, UpdateItem}, Events: {Query}},
	},
	// Workspace tool requests: appended to the inbox once per request id
	// (an idempotency record), their results read from the idempotency table.
	// Workspace tool requests are pushed to the sandbox, like messages.
	"workspace": {
		Tables: map[string][]string{
			Sessions:    {GetItem, UpdateItem},
			Events:      {PutItem},
			Idempotency: {GetItem, PutItem},
		},
		Push: true,
	},
	"embed": {
		Tables: map[string][]string{Sessions: {GetItem}},
	},
	"sandbox": {
		Tables: map[string][]string{
			Sessions: {GetItem, UpdateItem},
			Events:   {PutItem, Query},
			// Appends with an id are exactly-once through an idempotency
			// record; a push connection's record names its session; an
			// ended session's live slot is given back.
			Idempotency: {GetItem, PutItem, UpdateItem},
			// Pool sandboxes' launch codes, heartbeats and push connections.
			Registry: {GetItem, UpdateItem},
			// A job's sandbox's reports move its job (and publish its events).
			Jobs: jobsTable,
		},
		PublishJobEvents: true,
		LeadingKeys:      map[string][]string{Jobs: JobItems},
		WriteKeys:        map[string][]string{Registry: {PoolItems}},
		// A sandbox's events and live events are pushed to the agent's
		// viewers, who are served on the push channel (a viewer's record
		// and the reply being written are idempotency items).
		Push: true,
		Objects: map[string][]string{
			GuardrailsKey:              {GetObject},
			ConfigurationEnv:           {GetObject},
			"sessions/*/env/*":         {GetObject},
			"sessions/*/attachments/*": {GetObject},
			"sessions/*/tools/*":       {PutObject},
			// A configuration's snapshot, presigned for its sessions' sandboxes.
			"snapshots/configuration/*": {GetObject},
			// A job's outputs and log, presigned for its sandbox (keyed by
			// the job of the sandbox's session, never one it names).
			"jobs/*/output/*": {PutObject},
			"jobs/*/logs/*":   {PutObject},
			// Checkpoints: chunks presigned for the sandbox, verified
			// (read back) and recorded at its commit, and those past their
			// retention pruned (listed, deleted).
			"checkpoints/*": {GetObject, PutObject, DeleteObject},
		},
		// Checkpoints pruned; a resumed session's env submissions read
		// back.
		List: []string{"checkpoints/", "sessions/"},
		// The stop of a paused session's sandbox.
		Send: []string{JobsQueue},
	},
	"toolcallback": {
		Tables: map[string][]string{
			Sessions:    {GetItem, UpdateItem},
			Events:      {PutItem},
			Idempotency: {GetItem, PutItem, UpdateItem},
			Registry:    {UpdateItem},
			Jobs:        {PutItem},
		},
		Send:    []string{ToolsQueue},
		Objects: map[string][]string{"sessions/*/tools/*": {GetObject}, "snapshots/*": {PutObject}},
		List:    []string{"sessions/"},
		// Its events are pushed to the agent's viewers.
		Push: true,

		LeadingKeys: toolWrites,
	},
	// jobworker also sweeps: the by_due index of the sessions table.
	"jobworker": sweeping(worker),
	// The orchestrator's jobs and agent profiles; a job's live log is its
	// sandbox's session events, its whole log an object under jobs/.
	// A job's log followed live: the job, its session, its events.
	"joblogs": {
		Tables:      map[string][]string{Jobs: {GetItem}, Sessions: {GetItem}, Events: {Query}},
		LeadingKeys: map[string][]string{Jobs: JobItems},
	},
	"jobs": {
		Tables: map[string][]string{
			Jobs:     jobsTable,
			Registry: {GetItem, PutItem, Query},
			Sessions: {GetItem},
			Events:   {Query},
		},
		Send:             []string{JobsQueue},
		PublishJobEvents: true,
		Objects:          map[string][]string{"jobs/*": {GetObject}},
		LeadingKeys:      map[string][]string{Jobs: JobItems, Registry: {AgentProfileItems}},
	},
	// The model gateway authenticates the sandbox and adds each call's usage
	// to its session.
	"model": {
		// A call's hold and settlement: its session's usage, its app's
		// spend of the day and month (items of the idempotency table, read
		// back when a cap refuses); a session whose cap is spent is told
		// (an event) and ends.
		Tables: map[string][]string{Sessions: {GetItem, UpdateItem}, Idempotency: {GetItem, UpdateItem}, Events: {PutItem}},
		Models: true,
		// budget.exceeded and the end are pushed to the agent's viewers.
		Push: true,
	},
}

// For returns a function's access; ok is false for an unknown function.
func For(function string) (Access, bool) {
	a, ok := table[function]
	return a, ok
}

// Functions lists the functions with declared access.
func Functions() []string {
	var out []string
	for f := range table {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// AllowsTable reports whether a allows action on the table called name.
func (a Access) AllowsTable(name, action string) bool {
	return slices.Contains(a.Tables[name], action)
}

// AllowsItem reports whether a allows action on the item of the table called
// name whose partition key is key ("" when the call names no one item).
func (a Access) AllowsItem(name, action, key string) bool {
	if !a.AllowsTable(name, action) {
		return false
	}
	if w, ok := a.WriteKeys[name]; ok && slices.Contains(writes, action) && !hasPrefix(key, w) {
		return false
	}
	if action == Query && key != "" && slices.Contains(a.IndexKeys[name], key) {
		return true
	}
	prefixes, limited := a.LeadingKeys[name]
	return !limited || hasPrefix(key, prefixes)
}

// StreamActions are what reading a table's stream takes.
var StreamActions = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}

// writes are the item writes WriteKeys limits.
var writes = []string{PutItem, UpdateItem, DeleteItem}

// hasPrefix reports whether key ("" for none) starts with one of prefixes.
func hasPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if key != "" && strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// AllowsSend reports whether a may send to the queue called name (the
// orchestrator queue when it publishes job events: the bundled emulators'
// transport).
func (a Access) AllowsSend(name string) bool {
	return slices.Contains(a.Send, name) || a.PublishJobEvents && name == OrchestratorQueue
}

// AllowsPutEvents reports whether a may put events on the bus called name.
func (a Access) AllowsPutEvents(bus string) bool {
	return a.PublishJobEvents && bus == JobEventsBus
}

// AllowsObject reports whether a allows action on the object key (patterns use
// IAM's '*', which matches across '/').
func (a Access) AllowsObject(key, action string) bool {
	for pattern, actions := range a.Objects {
		if slices.Contains(actions, action) && glob(pattern).MatchString(key) {
			return true
		}
	}
	return false
}

// AllowsList reports whether a may list keys under prefix.
func (a Access) AllowsList(prefix string) bool {
	for _, p := range a.List {
		if strings.HasPrefix(prefix, p) {
			return true
		}
	}
	return false
}

func glob(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// sweeping is a's access plus what the sweep needs: querying the sessions
// table's due index (session.Sweeper.Sweep).
func sweeping(a Access) Access {
	tables := make(map[string][]string, len(a.Tables))
	for name, actions := range a.Tables {
		tables[name] = slices.Clone(actions)
	}
	tables[Sessions] = append(tables[Sessions], Query)
	a.Tables = tables
	return a
}
