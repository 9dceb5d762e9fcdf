// Package resources is the single definition of every AWS resource Remote Agents
// uses: DynamoDB tables, SQS queues with their dead-letter queues, and the S3 bucket.
//
// It holds plain data and imports no AWS SDK. The bootstrap (local runs, tests, the
// LocalStack init hook) creates these resources from it, and the CDK stack declares
// the same names and keys from it, so the two never drift.
package resources

import (
	"fmt"
	"regexp"
	"time"

	"github.com/remote-agents/remote-agents/shared/jobevents"
)

// AttrType is the DynamoDB scalar type of a key attribute.
type AttrType string

// Key attribute types.
const (
	String AttrType = "S"
	Number AttrType = "N"
)

// Key names one key attribute and its type.
type Key struct {
	Name string
	Type AttrType
}

// Index is a global secondary index projecting all attributes.
type Index struct {
	Name         string
	PartitionKey Key
	SortKey      *Key // nil when the index has only a partition key
}

// Table is a DynamoDB table billed on demand.
type Table struct {
	// Name is the full table name, environment prefix included.
	Name         string
	PartitionKey Key
	SortKey      *Key // nil when the table has only a partition key
	Indexes      []Index
	// TTLAttribute holds the epoch-seconds expiry DynamoDB deletes items by.
	TTLAttribute string
	// Stream: the table has a stream of its items' new images (the events
	// table's, which webhooks are delivered from).
	Stream bool
}

// Queue is a standard SQS queue and the dead-letter queue its redrive policy targets.
type Queue struct {
	// Name is the full queue name, environment prefix included.
	Name string
	// DeadLetterName is the full name of its dead-letter queue.
	DeadLetterName    string
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many receives a message gets before it moves to the DLQ.
	MaxReceiveCount int
	Retention       time.Duration
	// DeadLetterRetention is how long messages stay in the DLQ for inspection.
	DeadLetterRetention time.Duration
}

// EventRule forwards every event of one source on an EventBridge bus, as it
// is (the envelope), to a queue of the set.
type EventRule struct {
	Bus    string
	Name   string
	Source string
	// Queue is the target queue's full name.
	Queue string
}

// Bucket is the S3 bucket holding outputs, logs, snapshots and artifacts.
type Bucket struct {
	Name string
}

// Set is every resource of one environment.
type Set struct {
	Env         string
	Sessions    Table
	Events      Table
	Idempotency Table
	Registry    Table
	Jobs        Table
	JobsQueue   Queue
	ToolsQueue  Queue
	// WebhooksQueue carries webhook deliveries: a trigger per agent whose
	// stream grew, retries and replays (package webhook).
	WebhooksQueue Queue
	// OrchestratorQueue is where the orchestrator reads the jobs' events
	// (package jobevents): the EventBridge rule on the jobs bus forwards them
	// there on AWS and LocalStack; on the bundled emulators the publisher
	// sends them there itself.
	OrchestratorQueue Queue
	// JobEvents forwards the jobs' events from their bus to the orchestrator
	// queue (where there is an EventBridge: AWS, LocalStack).
	JobEvents EventRule
	Bucket    Bucket
}

// Tables lists the set's tables in a stable order.
func (s Set) Tables() []Table {
	return []Table{s.Sessions, s.Events, s.Idempotency, s.Registry, s.Jobs}
}

// SecretsPrefix starts the names of the apps' secrets in Secrets Manager:
// ra/<env>/secrets/<app>/<name>.
func (s Set) SecretsPrefix() string { return "ra/" + s.Env + "/secrets/" }

// Queues lists the set's queues in a stable order.
func (s Set) Queues() []Queue {
	return []Queue{s.JobsQueue, s.ToolsQueue, s.OrchestratorQueue, s.WebhooksQueue}
}

// TTLAttribute is the attribute every table expires items by (epoch seconds).
const TTLAttribute = "expires_at"

// Index names, used by the stores that query them.
const (
	// SessionsByProject lists a project's sessions by creation time.
	SessionsByProject = "by_project"
	// SessionsByTenant lists a tenant's sessions, newest first by list_key
	// (the fleet list); sessions of no tenant (jobs' sandboxes) are not in it.
	SessionsByTenant = "by_tenant"
	// SessionsByDue finds the live sessions that are due to show life (the
	// sweep): partition watch_shard (one of session.WatchShards, set only
	// while a session is live), sort due_at (epoch ms).
	SessionsByDue = "by_due"
	// SessionsByLive counts a tenant's live sessions (the concurrent
	// sessions quota): partition live_tenant, set only while a session of a
	// tenant is live.
	SessionsByLive = "by_live"
	// RegistryByKind lists registry items of one kind (project, persona, agent_type, app_key).
	RegistryByKind = "by_kind"
	// JobsByCommand lists the jobs of one orchestrator command.
	JobsByCommand = "by_command"
	// JobsByAgent lists the jobs run by one agent profile.
	JobsByAgent = "by_agent"
)

var envPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// ValidateEnv reports whether env can prefix resource names: lower-case letters,
// digits and hyphens, starting with a letter, at most 31 characters (S3 bucket
// names are the tightest constraint).
func ValidateEnv(env string) error {
	if !envPattern.MatchString(env) {
		return fmt.Errorf("environment name %q: want 1-31 lower-case letters, digits or hyphens, starting with a letter", env)
	}
	return nil
}

// For returns the resources of environment env. Names are "ra-<env>-<what>".
func For(env string) (Set, error) {
	if err := ValidateEnv(env); err != nil {
		return Set{}, err
	}
	name := func(what string) string { return "ra-" + env + "-" + what }
	str := func(n string) Key { return Key{Name: n, Type: String} }
	sortKey := func(n string, t AttrType) *Key { return &Key{Name: n, Type: t} }
	queue := func(what string, visibility time.Duration) Queue {
		return Queue{
			Name:                name(what),
			DeadLetterName:      name(what + "-dlq"),
			VisibilityTimeout:   visibility,
			MaxReceiveCount:     5,
			Retention:           4 * 24 * time.Hour,
			DeadLetterRetention: 14 * 24 * time.Hour,
		}
	}
	return Set{
		Env: env,
		// One item per session, keyed by its random id: reads and writes spread evenly.
		Sessions: Table{
			Name:         name("sessions"),
			PartitionKey: str("session_id"),
			Indexes: []Index{{
				Name:         SessionsByProject,
				PartitionKey: str("project_name"),
				SortKey:      sortKey("created_at", String),
			}, {
				Name:         SessionsByTenant,
				PartitionKey: str("tenant"),
				SortKey:      sortKey("list_key", String),
			}, {
				Name:         SessionsByDue,
				PartitionKey: str("watch_shard"),
				SortKey:      sortKey("due_at", Number),
			}, {
				Name:         SessionsByLive,
				PartitionKey: str("live_tenant"),
			}},
			TTLAttribute: TTLAttribute,
		},
		// A session's events in order: partition per session, sequence number sorts.
		Events: Table{
			Name:         name("events"),
			PartitionKey: str("session_id"),
			SortKey:      sortKey("seq", Number),
			TTLAttribute: TTLAttribute,
			Stream:       true,
		},
		// Idempotency records (create requests, launches, tool calls), keyed by scope.
		Idempotency: Table{
			Name:         name("idempotency"),
			PartitionKey: str("key"),
			TTLAttribute: TTLAttribute,
		},
		// Projects, personas, agent types and app keys: pk/sk items, listed by kind.
		Registry: Table{
			Name:         name("registry"),
			PartitionKey: str("pk"),
			SortKey:      sortKey("sk", String),
			Indexes: []Index{{
				Name:         RegistryByKind,
				PartitionKey: str("kind"),
				SortKey:      sortKey("name", String),
			}},
			TTLAttribute: TTLAttribute,
		},
		// Orchestrator jobs and their outputs: the job item plus OUTPUT# items under it.
		Jobs: Table{
			Name:         name("jobs"),
			PartitionKey: str("job_id"),
			SortKey:      sortKey("sk", String),
			Indexes: []Index{
				{Name: JobsByCommand, PartitionKey: str("command_id"), SortKey: sortKey("created_at", String)},
				{Name: JobsByAgent, PartitionKey: str("agent_id"), SortKey: sortKey("created_at", String)},
			},
			TTLAttribute: TTLAttribute,
		},
		JobsQueue:  queue("jobs", 5*time.Minute),
		ToolsQueue: queue("tools", 15*time.Minute),
		// A delivery run takes at most webhook.Lease (2 min).
		WebhooksQueue: queue("webhooks", 5*time.Minute),
		// The orchestrator's consumer holds a job event while it handles it.
		OrchestratorQueue: queue("orchestrator", 2*time.Minute),
		JobEvents:         EventRule{Bus: jobevents.BusName(env), Name: name("job-events"), Source: jobevents.Source, Queue: name("orchestrator")},
		Bucket:            Bucket{Name: name("data")},
	}, nil
}
