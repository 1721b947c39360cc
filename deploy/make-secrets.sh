#!/usr/bin/env bash
# Makes the secret files deploy/compose.yaml reads, once: random passwords and a master key.
# Keep deploy/secrets/master_key backed up: without it, stored source credentials and webhook
# secrets cannot be read.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p secrets
# The folder is the host's protection. The files must be readable by the containers' own users
# (Stowage runs as uid 1000): compose mounts them with the host's owner and mode.
chmod 700 secrets
umask 022
[ -s secrets/db_password ] || head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > secrets/db_password
[ -s secrets/s3_secret ] || head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > secrets/s3_secret
[ -s secrets/master_key ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > secrets/master_key
printf 'postgres://stowage:%s@db:5432/stowage' "$(cat secrets/db_password)" > secrets/database_url
echo "secrets in $(pwd)/secrets"
