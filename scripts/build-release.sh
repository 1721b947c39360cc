#!/usr/bin/env bash
# Builds a release of Stowage into OUT (default ./release): the compiled server (dist/), its bins,
# and node_modules with production dependencies only. The Dockerfile's build stage runs exactly
# this script, and test/release.test.ts runs it too, so the image and CI build the same way.
#
#   bash scripts/build-release.sh [OUT]
#
# STOWAGE_RELEASE_REUSE_MODULES=1 keeps a node_modules that is already installed instead of running
# `npm ci` (the test does this: installing from scratch takes minutes and tests npm, not Stowage).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-release}

if [ "${STOWAGE_RELEASE_REUSE_MODULES:-0}" != 1 ]; then
  npm ci --no-audit --no-fund
fi
npm run build
# Drop the dev dependencies (tsx, TypeScript, esbuild, test tools) from the installed tree.
npm prune --omit=dev --no-audit --no-fund
# cosmiconfig (under graphile-worker) names TypeScript as an optional peer, and prune keeps an
# optional peer that is installed; `npm ci --omit=dev` would never have installed it (30 MB).
rm -rf node_modules/typescript node_modules/@typescript node_modules/.bin/tsc node_modules/.bin/tsserver

rm -rf "$out"
mkdir -p "$out/scripts"
cp -R dist bin node_modules package.json package-lock.json "$out/"
cp scripts/build-info.mjs "$out/scripts/"
echo "release in $out"
