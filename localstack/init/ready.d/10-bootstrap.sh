#!/usr/bin/env bash
# LocalStack init hook (ready stage): creates the environment's tables, queues and
# bucket with the same bootstrap the dev server and the tests use, uploads the
# guardrails document to where the functions read it (RA_GUARDRAILS_PATH, by
# default s3://ra-<env>-data/platform/platform-guardrails.md) and loads the seed
# data and the development app key (RA_DEV_APP_KEY, default ra_dev_app_key), as
# `make dev` does. Idempotent, so a restarted container re-runs it safely.
set -euo pipefail
# LocalStack's endpoint, unless per-service endpoints are given (the tests run
# the hook against the bundled emulators, which have no EventBridge).
if [ -z "${AWS_ENDPOINT_URL_SQS:-}" ]; then
	export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
fi
export AWS_REGION="${AWS_REGION:-${AWS_DEFAULT_REGION:-us-east-1}}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
exec "${RA_BOOTSTRAP_BIN:-/opt/remote-agents/bootstrap}" -env "${RA_ENV:-dev}" \
	-guardrails "${RA_GUARDRAILS_FILE:-/opt/remote-agents/platform-guardrails.md}" -seed
