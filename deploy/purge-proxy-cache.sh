#!/usr/bin/env bash
# Deletes every entry nginx's proxy cache holds for a Stowage path, whatever the rendition tokens,
# query (?v=, tsig) or Accept class: docs/deploy.md, "Caching delivery in nginx (proxy_cache)".
# nginx writes each entry's key into its file as a line "KEY: <scheme>://<host><request uri> <accept class>"
# (the recipe's proxy_cache_key), so the files whose key names the path are found by reading them.
#
#   deploy/purge-proxy-cache.sh <cache dir> <workspace id> <path as in the URL, percent-encoded>
#   deploy/purge-proxy-cache.sh /var/cache/nginx/stowage 7yKp2cR9tQ products/shoe.jpg
#   deploy/purge-proxy-cache.sh /var/cache/nginx/stowage 7yKp2cR9tQ products/      # a folder: all below it
#
# Prints how many entries it deleted. Exit 2 on bad usage.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 <cache dir> <workspace id> <path>" >&2
  exit 2
fi
dir=$1
workspace=$2
path=${3#/}
if ! [[ $workspace =~ ^[0-9A-Za-z]{10,16}(-[A-Za-z0-9_-]{1,64})?$ ]]; then
  echo "not a workspace id: $workspace" >&2
  exit 2
fi
if [ -z "$path" ] && [ "$3" != "/" ]; then
  echo "no path given (the whole workspace is the path /)" >&2
  exit 2
fi
if [ ! -d "$dir" ]; then
  echo "no such cache directory: $dir" >&2
  exit 2
fi

# The path as an extended regular expression, matched literally.
literal=$(printf '%s' "$path" | sed -e 's/[][\.^$*+?(){}|/]/\\&/g')
if [ -z "$path" ] || [[ $path == */ ]]; then
  rest='.*'
else
  # The file itself, with any query, then the space before the Accept class.
  rest='(\?[^ ]*)? '
fi
# Any token segments (or folders: a path ending the same way is purged too, which costs a miss).
pattern="^KEY: [a-z]+://[^/]+/${workspace}/(.*/)?${literal}${rest}"

# Cache entries are named by the MD5 of their key; anything else (files nginx is still writing)
# is left alone.
count=$(find "$dir" -type f -regextype posix-extended -regex '.*/[0-9a-f]{32}' -print0 |
  xargs -0r sh -c 'grep -laZ -m1 -E -e "$0" -- "$@" || [ $? -eq 1 ]' "$pattern" |
  { n=0; while IFS= read -r -d '' f; do rm -f -- "$f" && n=$((n + 1)); done; echo "$n"; })
echo "purged $count entries"
