# syntax=docker/dockerfile:1
# Stowage's container image. Both stages run on the current Node LTS (26); the build stage has the
# compilers better-sqlite3 may need, the runtime stage is slim. The build runs
# scripts/build-release.sh, the same script CI runs (test/release.test.ts keeps them in step).
#
#   docker build -t stowage .
#   docker run -p 3000:3000 -v stowage-data:/data --stop-timeout 45 stowage

FROM node:26 AS build
WORKDIR /src
COPY . .
RUN bash scripts/build-release.sh /release

FROM node:26-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    STOWAGE_DATA_DIR=/data \
    STOWAGE_LOG_FORMAT=json \
    STOWAGE_SHUTDOWN_DELAY_MS=5000 \
    STOWAGE_SHUTDOWN_TIMEOUT_MS=30000
# ffmpeg/ffprobe probe video and audio uploads and make posters (src/media/video/); without them
# Stowage runs with video features off.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build --chown=root:root /release /app
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000
# SIGTERM starts the graceful shutdown (src/main.ts): /readyz turns 503 at once, the listener closes
# after STOWAGE_SHUTDOWN_DELAY_MS, uploads in flight get STOWAGE_SHUTDOWN_TIMEOUT_MS. Give the
# container at least their sum plus a margin before it is killed (docker --stop-timeout 45,
# compose stop_grace_period: 45s, Kubernetes terminationGracePeriodSeconds: 45).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=64", "bin/stowage-server.js"]
