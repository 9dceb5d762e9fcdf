# Remote Agents — build, test and run locally. `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := .cache/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

# A race-built test binary sleeps a second at its exit by default (for races
# in goroutines still running): a second for each of the hundred test
# packages. A race found in a test still fails it.
export GORACE ?= atexit_sleep_ms=0

# Every folder under functions/ with a main.go is a Lambda function: no list to keep.
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
ZIPS      := $(FUNCTIONS:%=dist/%.zip)

# Builds functions into dist/<name>.zip (and dist/<name>/bootstrap) for
# linux/arm64, reproducibly: the same source gives the same zip, so a deploy
# updates only the functions whose code changed.
LAMBDA_BUILD := $(GO) run ./localstack/cmd/lambdabuild -out dist

NODE_MODULES := localstack/node_modules/.package-lock.json
EMULATORS    := $(GO) run ./localstack/cmd/emulators
ENV_FILE     := .cache/emulators.env
GO_FILES      = $(shell find . -name '*.go' -not -path './.cache/*' -not -path '*/node_modules/*' -not -path './dist/*')

# The CDK app (infra/, its own module) runs on Node through jsii: its caches and
# temporary files stay in the build tree; Node 20's end-of-life banner is
# silenced by jsii's documented variable.
INFRA_ENV := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 JSII_RUNTIME_PACKAGE_CACHE_ROOT=$(CURDIR)/.cache/jsii \
	TMPDIR=$(CURDIR)/.cache/tmp CDK_DISABLE_VERSION_CHECK=1
ENV ?= dev
# More of the CDK CLI's arguments for deploy, diff and destroy: context for one
# environment, e.g. CDK_ARGS="-c allowedOrigins.prod=https://app.example.com".
CDK_ARGS ?=
CDK := cd infra && $(INFRA_ENV) npx --no-install cdk
INFRA_NODE_MODULES := infra/node_modules/.package-lock.json

.PHONY: e2b-latest test-e2b image image-race test-image test-image-run test-fargate test-fargate-run help build test docs fmt-check tidy-check vet lint lint-bin test-go test-faults test-security fuzz fuzz-short bench-short test-infra bench dev emulators localstack-up localstack-down synth deploy diff destroy providers deploy-local sam-local clean FORCE

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

build: dist/agent ## cross-compile every function into dist/<name>.zip and the agent into dist/agent, byte for byte the same from the same source
	$(LAMBDA_BUILD) $(FUNCTIONS)
	@ls -l $(ZIPS) dist/agent | awk '{printf "  %-28s %7.2f MB\n", $$NF, $$5/1048576}'

dist/%.zip: FORCE
	$(LAMBDA_BUILD) $*

# The version is git describe's: the same for an unchanged tree.
dist/agent: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=$(VERSION)" -o $@ ./sandbox/cmd/agent

# The bootstrap the LocalStack init hook runs, for the container's architecture.
dist/localstack/bootstrap: FORCE
	GOOS=linux GOARCH=$$($(GO) env GOARCH) CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./localstack/cmd/bootstrap

# make test runs its stages in order and says how long each took. The
# stages of a group joined by + run at once, each into its log, shown when
# all are done: the fuzzer's links and the CDK bindings' compile are single
# threaded for long stretches and the benchmarks mostly wait, so on two
# cores the three take little more than the longest. (The short run's
# figures are a smoke test, written under .cache/; make bench's are the
# report, measured alone.)
# The first group mostly waits on the module proxy (tidy-check) while the
# linter and the tools module compile.
# The sandbox image is built in the first group too, with the agent the
# suites run (so its compile is not a second one), and its test runs in the
# next group (test-image-run: no rebuild). The security suite, whose token
# timing test wants a quiet machine, runs alone. The fault suite and the
# suites under the Fargate profile (test-fargate-run) come last, the two at
# once: they create agents by the hundred against their own DynamoDB
# Local, which, beside the fuzzers, the benchmarks and the CDK tests on a
# slow 2-core machine, timed their creates out (a minute each alone).
TEST_STAGES := fmt-check tidy-check+vet+lint-bin+image-race lint test-go test-security bench-short+fuzz-short+test-infra+test-image-run test-faults+test-fargate-run

test: ## format check, go.mod tidy, vet, lint, unit + integration tests (-race) on the local AWS, the fault and security suites, the benchmarks' short run, each fuzz target briefly, the CDK stack's tests, jobs in the sandbox image, the job, workspace and tool suites under the Fargate profile
	@mkdir -p .cache
	@for group in $(TEST_STAGES); do \
		if [ "$$group" = "$${group%%+*}" ]; then \
			began=$$(date +%s); \
			$(MAKE) --no-print-directory $$group || { echo "make test: $$group failed after $$(( $$(date +%s) - began )) s"; exit 1; }; \
			echo "make test: $$group took $$(( $$(date +%s) - began )) s"; \
			continue; \
		fi; \
		pids=""; \
		for stage in $${group//+/ }; do \
			( began=$$(date +%s); log=.cache/make-test-$$stage.log; \
			  if $(MAKE) --no-print-directory $$stage > $$log 2>&1; then echo "make test: $$stage took $$(( $$(date +%s) - began )) s" >> $$log; \
			  else echo "make test: $$stage failed after $$(( $$(date +%s) - began )) s" >> $$log; exit 1; fi ) & \
			pids="$$pids $$!"; \
		done; \
		failed=0; for pid in $$pids; do wait $$pid || failed=1; done; \
		for stage in $${group//+/ }; do cat .cache/make-test-$$stage.log; done; \
		[ $$failed = 0 ] || exit 1; \
	done

docs: ## rewrite the generated parts of docs/: configuration.md from shared/config's table of settings, api.md's error codes (tests fail while they differ)
	$(GO) test -count=1 -run '^(TestConfigurationReference|TestAPIErrorCodes)$$' . -update

fmt-check:
	@out=$$(gofmt -l $(GO_FILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# go.mod and go.sum of every module are exactly what `go mod tidy` makes them.
tidy-check:
	@for m in . infra localstack/tools; do (cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy needed in $$m"; exit 1; }; done

# The main module's vet is lint's govet (the same analyzers, .golangci.yml):
# one type-check of the module, not two. The tools module is vetted here.
vet:
	cd localstack/tools && $(GO) vet ./...

# Another checkout's lint (a worktree, a second clone) may run at once:
# golangci-lint would otherwise refuse to start rather than wait.
# It type-checks from the compiler's export data, compiled here with -race:
# the build test-go and the suites then find in the cache (a plain build
# would compile every package a third time). The linter itself is built
# without it.
lint: $(GOLANGCI_LINT)
	GOFLAGS="$${GOFLAGS:-} -race" $(GOLANGCI_LINT) run --allow-parallel-runners ./...

lint-bin: $(GOLANGCI_LINT)

$(GOLANGCI_LINT):
	GOBIN=$(CURDIR)/$(@D) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# Tests reuse AWS endpoints already in the environment (LocalStack, running
# emulators); otherwise the emulators run for the duration of the command.
WITH_AWS = if [ -n "$${AWS_ENDPOINT_URL:-}$${AWS_ENDPOINT_URL_DYNAMODB:-}" ]; then $(1); else $(EMULATORS) -- $(1); fi

# The fault and security suites are tests named TestFault… and TestSecurity…:
# test-go leaves them to their own targets, which print what each case checked.
SUITES := ^Test(Fault|Security)
# The E2B SDK suites (the unmodified SDK through the sandbox proxy): in
# test-go with the rest, and on their own, verbose, in make test-e2b.
E2B_SDK_SUITES := ^TestE2B(Conformance|Quickstart)$$
# The packages with a test named $(1)…: linking every package's tests again to
# find none would cost minutes.
TESTS_OF = $$(grep -rl --include='*_test.go' '^func $(1)' . | grep -v -e node_modules -e '^./.cache' -e '^./infra/' | xargs -n1 dirname | sort -u)

# -parallel 8: the end-to-end tests mostly wait (on sandboxes, the emulators,
# a browser); two at a time (GOMAXPROCS) left the cores idle: 240 s → 145 s
# for localstack/systemtest on 2 cores. (Four packages at once, -p 4, was
# slower: 578 s against 526 s for the stage on a clean clone.)
# The end-to-end tests' sandboxes run an agent built once here with -race
# (RA_AGENT_BIN): a race in the agent fails them too, and it links the
# packages lint and test-go compiled with -race, where a plain build would
# compile all its dependencies again; each test package building it at once
# would compile it as many times. make bench measures dist/agent.
AGENT_RACE := .cache/bin/agent-race
E2E_ENV := env RA_AGENT_BIN=$(CURDIR)/$(AGENT_RACE)
BENCH_ENV := env RA_AGENT_BIN=$(CURDIR)/dist/agent

$(AGENT_RACE): FORCE
	@mkdir -p $(@D)
	$(GO) build -race -o $@ ./sandbox/cmd/agent


test-go: $(NODE_MODULES) $(AGENT_RACE)
	@$(call WITH_AWS,$(E2E_ENV) $(GO) test -race -count=1 -parallel 8 -skip '$(SUITES)' ./...)

test-e2b: $(NODE_MODULES) $(AGENT_RACE) ## the E2B SDK suites: the conformance suite with the pinned e2b 2.45.0 and 2.51.0, and docs/e2b.md's quickstart, against dev servers
	@$(call WITH_AWS,$(E2E_ENV) $(GO) test -race -count=1 -v -run '$(E2B_SDK_SUITES)' ./localstack/e2bconformance ./localstack/doccommands)

# The sandbox image without a Docker daemon: sandbox/Dockerfile's debian
# stage, by buildah on a base debootstrap makes (sandbox/image/build.sh),
# with IMAGE_AGENT: dist/agent, or in make test the race-detecting agent the
# suites run (built once, early, for both).
IMAGE_AGENT ?= dist/agent
image: $(IMAGE_AGENT) ## build the sandbox image without Docker (sandbox/Dockerfile's debian stage, buildah on a debootstrap base) into .cache/image; its root filesystem is .cache/image/rootfs (root; apt's debootstrap and buildah)
	@AGENT=$(IMAGE_AGENT) bash sandbox/image/build.sh

image-race:
	@$(MAKE) --no-print-directory image IMAGE_AGENT=$(AGENT_RACE)

test-image: image ## build the sandbox image and run jobs with the agent in it under the Fargate profile (TestJobsInTheImage)
	@$(MAKE) --no-print-directory test-image-run

# Its sandboxes run the image's agent, whichever it was built with (its copy
# in the image's build context stands for it on the host).
test-image-run: $(NODE_MODULES)
	@$(call WITH_AWS,env RA_AGENT_BIN=$(CURDIR)/.cache/image/context/dist/agent RA_TEST_IMAGE_ROOTFS=$(CURDIR)/.cache/image/rootfs $(GO) test -race -count=1 -tags image -run '^TestJobsInTheImage$$' -v ./localstack/systemtest)

# The job, workspace and tool suites (tests named so) again, their
# sandboxes with a Fargate task's rights (process.ProfileFargate: Docker's
# default capabilities, no_new_privs, tools as an unprivileged user) unless
# a test picks its own.
FARGATE_SUITES := ^Test(Job|FailedJob|Workspace|Tool|ALongToolRun|NothingSecretInTheToolsReach|SetupToolsAndTokensAreGated|AgentUsesContractTools|AgentTypesToolsBoundTheAgent)

test-fargate: image ## build the sandbox image, run jobs with the agent in it (TestJobsInTheImage), and the job, workspace and tool suites under the Fargate profile
	@$(MAKE) --no-print-directory test-image-run test-fargate-run

test-fargate-run: $(NODE_MODULES) $(AGENT_RACE)
	@$(call WITH_AWS,$(E2E_ENV) RA_TEST_SANDBOX_PROFILE=fargate $(GO) test -race -count=1 -parallel 8 -run '$(FARGATE_SUITES)' ./localstack/systemtest)

e2b-latest: $(NODE_MODULES) $(AGENT_RACE) ## the E2B conformance suite (localstack/e2bconformance) against e2b@latest from npm; make test runs it against the pinned 2.45.0 and 2.51.0
	@rm -rf .cache/e2b-latest && mkdir -p .cache/e2b-latest
	cd .cache/e2b-latest && npm install --ignore-scripts --no-audit --no-fund --prefix . e2b@latest
	@$(call WITH_AWS,$(E2E_ENV) RA_E2B_SDK=$(CURDIR)/.cache/e2b-latest/node_modules/e2b $(GO) test -race -count=1 -v -run TestE2BConformance ./localstack/e2bconformance)

test-faults: $(NODE_MODULES) $(AGENT_RACE) ## the fault suite: crashes, redeliveries, an outage of DynamoDB, poison messages, 200 concurrent creates, ECS events out of order; each case says what "nothing lost" means for it
	@$(call WITH_AWS,$(E2E_ENV) $(GO) test -race -count=1 -run '^TestFault' -v $(call TESTS_OF,TestFault))

test-security: $(NODE_MODULES) $(AGENT_RACE) ## the security suite: every route × every wrong credential, path traversal, oversize bodies, log injection, SSRF, token timing, the runtime's policy escapes
	@$(call WITH_AWS,$(E2E_ENV) $(GO) test -race -count=1 -run '^TestSecurity' -v $(call TESTS_OF,TestSecurity))

# Every Fuzz… target, found in the test files: make fuzz runs each for
# FUZZTIME (10 minutes); make test runs each for 2,000 executions (a count:
# Go 1.26's fuzzer can fail a time-bounded run at its deadline with "context
# deadline exceeded" and no failing input, go.dev/issue/75804, which make fuzz
# reports and passes over). Each package's instrumented test binary is built
# once (go test -c -fuzz) and runs each of its targets in the package's
# folder, with go test's corpus cache. A crasher is written to the package's
# testdata/fuzz/, where it stays as a seed.
FUZZTIME ?= 10m
fuzz: ## run every fuzz target for FUZZTIME each (10m); crashers found become seeds under testdata/fuzz/
	@mkdir -p .cache/fuzz
	@cache=$$($(GO) env GOCACHE)/fuzz; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v -e node_modules -e '^./.cache' | xargs -n1 dirname | sort -u); do \
		targets=$$(grep -h '^func Fuzz' $$dir/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/'); \
		bin=$(CURDIR)/.cache/fuzz/$$(echo $${dir#./} | tr / _).test; \
		pkg=$$(cd $$dir && $(GO) list .); \
		(cd $$dir && $(GO) test -c -fuzz "^$${targets%%$$'\n'*}$$" -o $$bin .) || exit 1; \
		for target in $$targets; do \
			echo "fuzz: $$dir $$target for $(FUZZTIME)"; \
			if ! (cd $$dir && $$bin -test.run '^$$' -test.fuzz "^$$target$$" -test.fuzztime $(FUZZTIME) -test.fuzzcachedir $$cache/$$pkg) 2>&1 | tee .cache/fuzz.log; then \
				if grep -q 'context deadline exceeded' .cache/fuzz.log && ! grep -q 'Failing input written' .cache/fuzz.log; then \
					echo "fuzz: $$target: the fuzzer's own deadline race (go.dev/issue/75804), no failing input: not a finding"; \
				else exit 1; fi; \
			fi; \
		done; \
	done

fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=2000x

# make bench writes BENCHMARKS.md and benchmarks-create.png at the root;
# the short run (make test) writes them under .cache/bench-short/.
BENCHREPORT = cd localstack/tools && $(GO) run ./benchreport -root ../..

bench-short: $(NODE_MODULES) $(AGENT_RACE)
	@$(call WITH_AWS,$(E2E_ENV) sh -c '$(BENCHREPORT) -short -race -command "make bench-short" -out .cache/bench-short/BENCHMARKS.md')

# The stack's tests synthesize dev and prod with placeholder code: no build needed.
test-infra:
	@mkdir -p .cache/tmp .cache/jsii
	cd infra && $(GO) vet ./... && $(INFRA_ENV) $(GO) test -count=1 ./...

# `go run .` starts from cdk.json's context with asset metadata on, as the CDK
# CLI does (infra/main.go), so the templates name each function's code.
synth: build ## synthesize every environment's stack offline into infra/cdk.out (RemoteAgents-<env>.template.json, with asset metadata)
	@mkdir -p .cache/tmp .cache/jsii
	cd infra && rm -rf cdk.out && $(INFRA_ENV) CDK_OUTDIR=cdk.out $(GO) run .
	@ls infra/cdk.out/*.template.json

$(INFRA_NODE_MODULES): infra/package.json infra/package-lock.json
	cd infra && npm ci --no-audit --no-fund

deploy: build $(INFRA_NODE_MODULES) ## deploy one environment to AWS: make deploy ENV=dev|staging|prod (AWS credentials; Docker only with -c buildSandboxImage=true); then prints which model providers have a key
	$(CDK) deploy -c env=$(ENV) $(CDK_ARGS) RemoteAgents-$(ENV) --require-approval broadening --outputs-file cdk.out/outputs-$(ENV).json
	@$(MAKE) --no-print-directory providers ENV=$(ENV) || echo "The stack is deployed; its model providers' secrets could not be checked (above)."

diff: build $(INFRA_NODE_MODULES) ## what `make deploy ENV=…` would change: cdk diff of RemoteAgents-<env> against the deployed stack (AWS credentials; changes nothing)
	$(CDK) diff -c env=$(ENV) $(CDK_ARGS) RemoteAgents-$(ENV)

# cdk destroy asks before deleting (no --force). Prod's RETAIN resources outlive
# the stack: see infra/README.md.
destroy: build $(INFRA_NODE_MODULES) ## delete ENV's stack from AWS after asking: make destroy ENV=dev (prod keeps its tables, bucket, queues, log groups, secrets and ECR repository)
	$(CDK) destroy -c env=$(ENV) $(CDK_ARGS) RemoteAgents-$(ENV)

# Never reads a key: Secrets Manager's DescribeSecret says whether a secret holds one.
providers: ## which model providers ENV's deployment has a key for, and the sandboxes' default model (AWS credentials; prints no key)
	cd infra && $(GO) run ./cmd/providers -env $(ENV) -outputs cdk.out/outputs-$(ENV).json

# The LocalStack variant of the stack (target=localstack): functions behind
# function URLs (printed as outputs), on the tables, queues and bucket the
# init hook made; no API Gateway, CloudFront or ECS (LocalStack Pro).
deploy-local: build $(INFRA_NODE_MODULES) ## deploy the stack's LocalStack variant with cdklocal: functions behind function URLs, no sandboxes (make localstack-up first; Docker)
	cd infra && $(INFRA_ENV) npx --no-install cdklocal bootstrap -c env=$(ENV) -c target=localstack && \
		$(INFRA_ENV) npx --no-install cdklocal deploy -c env=$(ENV) -c target=localstack RemoteAgents-$(ENV) --require-approval never \
		--outputs-file cdk.out/outputs-localstack-$(ENV).json

# The SAM target's template (infra/cdk.out/sam, never deployed) declares the
# endpoint, region and credentials SAM must override; infra/samconfig.toml
# holds the rest (localstack/sam-env.json, the host network, the port). SAM
# resolves a relative --config-file beside the template, not in the working
# directory: the path is absolute.
sam-local: build ## run the API with `sam local start-api` against LocalStack (make localstack-up first; SAM CLI, Docker); the streaming routes are not served (docs/local.md)
	@mkdir -p .cache/tmp .cache/jsii
	cd infra && rm -rf cdk.out/sam && $(INFRA_ENV) CDK_OUTDIR=cdk.out/sam CDK_CONTEXT_JSON='{"env":"$(ENV)","target":"sam"}' $(GO) run .
	cd infra && sam local start-api --config-file $(CURDIR)/infra/samconfig.toml -t cdk.out/sam/RemoteAgents-$(ENV).template.json

bench: $(NODE_MODULES) dist/agent ## run every benchmark once on the local stack and write BENCHMARKS.md with benchmarks-create.png beside it: create → ready cold, warm and the floor; tool callbacks; events to a browser; messages; job dispatch; the fleet list at 100 and 10,000 agents; the model gateway; Agentfile parse; the tool loop; each Lambda zip and its cold init under the runtime interface emulator (about 5 minutes on 2 cores)
	@$(call WITH_AWS,$(BENCH_ENV) sh -c '$(BENCHREPORT) -command "make bench"')

# The first build compiles every dependency, silently: say so before it.
dev: $(NODE_MODULES) ## run the system locally: emulators, resources, seed data, the API on 127.0.0.1:$RA_PORT (8080)
	@echo "make dev: building the agent and the dev server (a first build compiles every dependency: a few minutes on 2 cores; later builds take seconds)"
	@$(MAKE) --no-print-directory -s dist/agent
	@mkdir -p .cache/bin && $(GO) build -o .cache/bin/devserver ./localstack/cmd/devserver
	@echo "make dev: built; starting the emulators and the API"
	@.cache/bin/devserver

emulators: $(NODE_MODULES) ## run the bundled emulators until Ctrl-C (exports in .cache/emulators.env)
	@mkdir -p .cache
	$(EMULATORS) -env-file $(ENV_FILE)

localstack-up: dist/localstack/bootstrap ## start LocalStack in Docker; its init hook bootstraps the resources
	docker compose -f localstack/docker-compose.yml up -d --wait

localstack-down: ## stop LocalStack
	docker compose -f localstack/docker-compose.yml down

$(NODE_MODULES): localstack/package.json localstack/package-lock.json
	cd localstack && npm ci --ignore-scripts --no-audit --no-fund

clean: ## remove build output (dist/, infra/cdk.out)
	rm -rf dist infra/cdk.out

FORCE:
