# syntax=docker/dockerfile:1
# Modelgate, CPU image. Build: docker build -t modelgate .   Run: see deploy/compose.yaml.
# (Not built on the development machine, which cannot pull base images; scripts/dockerfile-steps.sh runs the same
# install and start steps in a clean folder as a non-root user.)

FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY src ./src
# The web console's files, served as they are (no build step).
COPY console ./console
# `npm ci` builds dist/ (the prepare script); dev dependencies are dropped afterwards. The default install has no
# GPU variants of node-llama-cpp and skips onnxruntime's CUDA download (docs/install.md).
RUN npm ci && npm prune --omit=dev

FROM node:22-bookworm-slim
ENV NODE_ENV=production \
    MODELGATE_HOST=0.0.0.0 \
    MODELGATE_PORT=8443 \
    MODELGATE_DATA_DIR=/data
# jemalloc in place of glibc's malloc (decision 0050): under hours of mixed traffic glibc's heaps keep growing with
# memory the process no longer holds (docs/operations.md, "Which allocator"); jemalloc's did not in the same probe.
# Its background thread returns what a thread freed and then left idle (an ONNX worker between requests); without it
# jemalloc purges an arena only when that arena is used again (decision 0051).
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(ls /usr/lib/*-linux-gnu/libjemalloc.so.2)" /usr/local/lib/libjemalloc.so.2
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_CONF=background_thread:true
WORKDIR /app
COPY --from=build --chown=node:node /app /app
COPY --chown=node:node deploy/healthcheck.mjs /app/deploy/healthcheck.mjs
RUN mkdir -p /data && chown node:node /data
# The node image's unprivileged user (uid 1000).
USER node
VOLUME ["/data"]
EXPOSE 8443
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD ["node", "/app/deploy/healthcheck.mjs"]
ENTRYPOINT ["node", "/app/dist/cli/run.js"]
CMD ["serve"]
