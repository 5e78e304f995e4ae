#!/usr/bin/env bash
# Runs the Dockerfile's install and start steps without Docker (this machine cannot pull base images): a clean
# copy of the committed tree (git archive HEAD) in a temporary folder, owned by and run as an unprivileged user,
# with Node 22 LTS: `npm ci && npm prune --omit=dev` (the build stage), then `node dist/cli/run.js serve` with the
# image's environment (MODELGATE_HOST/PORT/DATA_DIR) and deploy/healthcheck.mjs as the HEALTHCHECK runs it.
# Must run as root (to create the user); prints what it did and exits non-zero on any failure.
#
#   scripts/dockerfile-steps.sh [USER]      (default user: modelgate-steps)
set -euo pipefail
cd "$(dirname "$0")/.."
user=${1:-modelgate-steps}
[ "$(id -u)" = 0 ] || { echo "run as root (it creates and switches to an unprivileged user)" >&2; exit 1; }
# shellcheck source=.ci/node-lts.sh
source .ci/node-lts.sh
node_home=$(dirname "$(dirname "$(command -v node)")")

id "$user" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$user"
work=$(mktemp -d /tmp/dockerfile-steps.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/app" "$work/data" "$work/home"
git archive HEAD | tar -x -C "$work/app"
cp -a "$node_home" "$work/node"
chown -R "$user" "$work"

as_user() { su "$user" -s /bin/bash -c "export HOME=$work/home PATH=$work/node/bin:/usr/bin:/bin npm_config_nodedir=; cd $work/app && $1"; }
echo "== build stage, as $(su "$user" -s /bin/bash -c 'id -un') (uid $(id -u "$user")): npm ci && npm prune --omit=dev"
as_user "npm ci --no-fund --no-audit >$work/npm-ci.log 2>&1 && npm prune --omit=dev >>$work/npm-ci.log 2>&1" || { tail -30 "$work/npm-ci.log"; exit 1; }
echo "   installed: $(du -sh "$work/app/node_modules" | cut -f1) of node_modules, dist/ built: $(ls "$work/app/dist/cli/run.js")"

echo "== run stage: node dist/cli/run.js serve (MODELGATE_HOST=127.0.0.1 MODELGATE_PORT=18443 MODELGATE_DATA_DIR=$work/data)"
as_user "MODELGATE_HOST=127.0.0.1 MODELGATE_PORT=18443 MODELGATE_DATA_DIR=$work/data NODE_ENV=production node dist/cli/run.js serve >$work/serve.out 2>$work/serve.err & echo \$! >$work/serve.pid"
for _ in $(seq 1 60); do grep -q '^listening ' "$work/serve.out" 2>/dev/null && break; sleep 1; done
grep '^listening \|accounts create' "$work/serve.out" || { cat "$work/serve.err"; exit 1; }
echo "== HEALTHCHECK: node deploy/healthcheck.mjs"
if as_user "MODELGATE_PORT=18443 MODELGATE_DATA_DIR=$work/data node deploy/healthcheck.mjs"; then echo "   healthy"; else echo "   unhealthy"; status=1; fi
echo "   the server runs as: $(ps -o user= -p "$(cat "$work/serve.pid")")"
kill "$(cat "$work/serve.pid")"
exit "${status:-0}"
