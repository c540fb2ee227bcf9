# syntax=docker/dockerfile:1
# Container image of the df-worker daemon: a build stage compiles src/ to dist/, the runtime stage holds production
# dependencies, dist/, config/ and the example handlers, and runs as the unprivileged `node` user on a read-only root.

# Debian rather than Alpine: user handlers that pull in native npm modules get the glibc builds they usually ship.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the package's `prepare` would build before src/ is copied (the build is the step below), and the
# `node` devDependency's download is not needed on an image that has Node 24.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:24-bookworm-slim AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="df-worker" \
      org.opencontainers.image.description="Runs Data Factory custom tasks: polls within the API key's budgets, runs handler modules, reports every claimed execution." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/node:24-bookworm-slim"

# tini as PID 1: the kernel sends PID 1 no signal it has not asked for, and PID 1 inherits every orphaned process.
# df-worker handles SIGTERM itself, but a handler that spawns a shell whose children outlive it would leave zombies
# that Node never reaps. tini forwards SIGTERM to node only (no -g), so running handlers' child processes are not
# killed before the worker's own graceful shutdown decides to abort them.
# Not pinned: Debian stable only ships fixes for tini, and the package revision differs between architectures.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# --ignore-scripts: production dependencies need no install scripts; root owns /app so the worker cannot change it.
# valibot declares TypeScript as an optional peer, which npm keeps (24 MB) though nothing imports it at run time.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && rm -rf node_modules/typescript \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# The example handlers (their tests are left out by .dockerignore). Mount your own handlers over /app/handlers, or
# build `FROM df-worker` and replace them; see helm/README.md.
COPY handlers ./handlers

# The state folder (journal, month's budget usage) is the only place the worker writes; TMPDIR is for handlers that
# need scratch space: mount a tmpfs there when the root filesystem is read-only.
RUN mkdir -p /var/lib/df-worker \
 && chown 1000:1000 /var/lib/df-worker
# Semi-spaces of 2 MB for the young generation (V8 otherwise grows them several times over under allocation, in the
# main thread's heap and in each handler thread's): peak memory draining 3,000 executions falls from 228 to 180 MB
# for a drain about 1 s longer (bench:footprint --built); the daemon's pace is the service's 5 requests a second.
ENV DF_STATE_DIR=/var/lib/df-worker \
    DF_HANDLERS_DIR=/app/handlers \
    HOME=/home/node \
    TMPDIR=/tmp \
    NODE_OPTIONS=--max-semi-space-size=2
VOLUME ["/var/lib/df-worker"]

# uid/gid 1000 is the image's `node` user; numeric so that Kubernetes' runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 9464
STOPSIGNAL SIGTERM
# curl is not in slim images; Node's fetch does the probe. Kubernetes ignores HEALTHCHECK and uses the chart's probes.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.DF_HTTP_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "dist/cli/main.js"]
CMD ["start"]
