# The payments-gate image (docs/deployment.md, the image). Build: docker build -t payments-gate .
# Run: mount the policies and the credentials, give the backend:
#   docker run -v "$PWD/policies:/etc/payments-gate/policies:ro" -v "$PWD/secrets:/etc/payments-gate/credentials:ro" \
#     -e PAYMENTS_GATE_TARGET=http://backend:9000 -p 8080:8080 -p 9901:9901 payments-gate
# Arguments after the image name replace the command `serve`: `payments-gate serve --workers auto`, or another
# command, `payments-gate check-policies /etc/payments-gate/policies`.

# Node 26 (active LTS), pinned by version and digest: moved to the newest Node 26 image on the schedule of
# docs/deployment.md (rebuilds), so the image has the newest Node 26 release and Debian's security fixes.
# Build stage: every dependency, TypeScript included, then dist/. --ignore-scripts: the image's own node
# builds; the development dependency `node` (a Node binary for machines without Node 26) is not fetched.
FROM node:26.10.0-slim@sha256:ec7758ee051e457b468b32bde57b0879010b325bb9862718e9615225ce4aaae1 AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY lib ./lib
COPY scripts/bundle-cli.js ./scripts/
RUN npm ci --ignore-scripts --no-audit --no-fund && npm run build

# Final stage: the production dependencies and dist/, nothing else. --ignore-scripts: no dependency runs code at
# install (none needs to), and the package's own `prepare` has nothing to build here.
FROM node:26.10.0-slim@sha256:ec7758ee051e457b468b32bde57b0879010b325bb9862718e9615225ce4aaae1
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY scripts/healthcheck.js ./scripts/
# The sample policies, as the npm package has them: `demo` serves them, and a start that cannot read its folder names them.
COPY policies ./policies
COPY --from=build /app/dist ./dist
# Policies (a ConfigMap) and credentials (a Secret: credentials.json, hashes only) are mounted here.
VOLUME ["/etc/payments-gate/policies", "/etc/payments-gate/credentials"]
# The node user of the base image: the code and the mounts are read, never written.
USER 1000:1000
EXPOSE 8080 9901
# /healthz of the admin listener, wherever --admin (or PAYMENTS_GATE_ADMIN) puts it, asked by node: no curl here.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s CMD ["node", "scripts/healthcheck.js"]
# Where serve listens and what it reads, as variables rather than in CMD: `docker run ... payments-gate serve
# --workers auto` replaces the command and keeps them; `-e` changes one (docs/deployment.md, the image).
ENV PAYMENTS_GATE_LISTEN=0.0.0.0:8080 \
    PAYMENTS_GATE_ADMIN=0.0.0.0:9901 \
    PAYMENTS_GATE_POLICIES=/etc/payments-gate/policies \
    PAYMENTS_GATE_CREDENTIALS=/etc/payments-gate/credentials/credentials.json
# Exec form: node is PID 1 and gets SIGTERM itself, so a stop drains (docs/deployment-reference.md, stopping).
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve"]
