#!/usr/bin/env bash
# LocalStack init hook (ready stage): creates the environment's tables, queues and
# bucket with the same bootstrap the dev server and the tests use. Idempotent, so a
# restarted container re-runs it safely.
set -euo pipefail
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_REGION="${AWS_REGION:-${AWS_DEFAULT_REGION:-us-east-1}}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
exec "${RA_BOOTSTRAP_BIN:-/opt/remote-agents/bootstrap}" -env "${RA_ENV:-dev}"
