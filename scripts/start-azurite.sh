#!/usr/bin/env bash
# Starts Azurite's blob service on loopback (from node_modules) for the Azure tests.
# Idempotent. Prints the environment the tests read.
set -euo pipefail
PORT=${AZURITE_PORT:-10000}
DIR=${AZURITE_DIR:-/tmp/stowage-azurite}
cd "$(dirname "$0")/.."
if ! (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then
  mkdir -p "$DIR"
  nohup npx --no-install azurite-blob --blobHost 127.0.0.1 --blobPort "$PORT" --location "$DIR" \
    --skipApiVersionCheck --disableTelemetry --silent > "$DIR/azurite.log" 2>&1 &
  for _ in $(seq 1 60); do
    (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
    sleep 0.5
  done
  (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null || { echo "azurite did not start; see $DIR/azurite.log" >&2; exit 1; }
fi
# Azurite's well-known development account (public, documented by Microsoft).
echo "STOWAGE_TEST_AZURE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:${PORT}/devstoreaccount1;"
