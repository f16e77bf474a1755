import type { IncomingMessage, ServerResponse } from 'node:http'
import type { BackendErrorSource } from './backend-errors/rules.js'
import { watchBackendErrors, type BackendErrorStore } from './backend-errors/store.js'
import type { Authenticator } from './checks/auth.js'
import { buildChecks, type Checks } from './checks/index.js'
import { renamed } from './coded-error.js'
import { watchCredentials, type WatchedCredentials } from './credentials/watch.js'
import { DEFAULTS, IDEMPOTENCY_DEFAULTS } from './defaults.js'
import type { ErrorName, RejectOptions } from './errors.js'
import { sendError } from './http/answer.js'
import { RedisIdempotencyStore } from './idempotency/redis.js'
import { closeRedisClient, createRedisClient, whenReady, type RedisClient } from './idempotency/redis-client.js'
import { maskingLogger } from './log.js'
import { RedisLoginThrottle } from './login-throttle-redis.js'
import { checkGateOptions } from './option-values.js'
import type { Mode, PolicySource } from './policy/policy.js'
import { watchPolicies, type PolicyStore } from './policy/store.js'
import { lendRetryProtection } from './proxy/retry-protection.js'
import { rateLimiterOf } from './proxy/rate-limits.js'
import { expressErrorHandler, expressMiddleware } from './surfaces/express.js'
import { fastifyPlugin } from './surfaces/fastify.js'
import { honoMiddleware } from './surfaces/hono.js'
import { nodeHandler, type NodeNext } from './surfaces/node.js'
import {
  createHandlerStore,
  HandlerProtection,
  type HandlerRetryOptions,
  type HandlerStore,
} from './surfaces/retry-protection.js'
import type { GateLogger } from './surfaces/shared.js'
import type {
  ExpressErrorMiddleware,
  ExpressMiddleware,
  FastifyGatePlugin,
  HonoGateMiddleware,
} from './surfaces/types.js'
import type { ReloadOutcome } from './watch.js'

/**
 * The options of `createGate`, the same as `payments-gate serve`'s (docs/cli.md).
 * Every other options type of the library picks from this one. Retry protection around your handler
 * (`idempotency` and its settings) is off unless asked for (docs/middleware.md, retry protection).
 */
export interface GateOptions extends HandlerRetryOptions {
  /** A folder of `<entity>.json` policy files, loaded and then watched; or your own source of policies. Default `./policies`. */
  policies?: string | PolicySource
  /** A credentials file (`{"users": [...]}` with hashes from `payments-gate hash-password`), loaded and then watched; or your own authenticator. */
  credentials: string | Authenticator
  /** The `<vendor>` in the media types. Default `example`. */
  vendor?: string
  /** Prefix in front of `/payments/...` in the target a client sends, from the server's root, not the mount point (docs/middleware-reference.md, base path). Default empty. */
  basePath?: string
  /** Largest body read, in bytes, at least the smallest valid payment (`BODY_LIMIT_MIN`). Default 65536. */
  bodyLimit?: number
  /** A pino logger for reloads, refused policy and credentials files, and internal errors. Default: silent. */
  logger?: GateLogger
  /** Told what a reload of the watched policy folder did (the gateway counts it in its metrics). */
  onPolicyReload?: (outcome: ReloadOutcome) => void
  /** Told what a reload of the watched credentials file did. */
  onCredentialsReload?: (outcome: ReloadOutcome) => void
  /** Told what a reload of the watched `backendErrors` rules file did. */
  onBackendErrorsReload?: (outcome: ReloadOutcome) => void
  /**
   * The Redis that shares the failed-login throttle among every replica
   * (docs/credentials.md): a `redis://HOST:PORT[/DB]`,
   * `redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER` or
   * `redis-cluster://HOST:PORT[,HOST:PORT...]` URL (`rediss://`,
   * `rediss-sentinel://`, `rediss-cluster://`: over TLS), whose client the gate opens and closes,
   * or an ioredis client (or Cluster client) of yours. Default: each process counts alone. The same URL as
   * `idempotency`: one client carries both.
   */
  throttleRedis?: string | RedisClient
  /** A PEM bundle the certificate of a TLS `throttleRedis` URL is verified against, in place of the system's roots. */
  throttleRedisCa?: Buffer
  /** Told of every failure of the shared throttle's Redis and of retry protection's store (the gateway logs and counts them); without it, the store's go to `logger`. */
  onStoreError?: (error: unknown) => void
  /**
   * Rules naming the backend's error answers on the two operations, which the
   * proxy applies (docs/backend-faults.md): a JSON file, loaded and then
   * watched; or your own source. Default: names by status only.
   */
  backendErrors?: string | BackendErrorSource
  /**
   * `enforce` (the default) refuses what the checks refuse. `report` passes every payment whose
   * entity the user may act for on as it came (the middleware calls your handler) and reports what
   * enforce would have done; a policy's `mode` overrides it for its entity (docs/rollout.md).
   */
  mode?: Mode
}

/**
 * The checks of docs/checks.md, built once, in the shapes a Node service can mount. Typed without any
 * framework's types (surfaces/types.ts); `payments-gate/fastify` and `payments-gate/hono` add theirs.
 */
export interface Gate {
  /** The checks themselves, for callers that hold a whole request (e.g. a queue consumer). */
  readonly checks: Checks
  /** The policies in force: the watched folder's, or the source given. */
  readonly policies: PolicySource
  /** The rules for the backend's error answers, which the proxy applies; undefined when none were given. */
  readonly backendErrors: BackendErrorSource | undefined
  /**
   * A `node:http` request handler: refusals are answered; every other request
   * goes to `next`, with the passed request (document, operation, entity,
   * principal) for the two operations, or `undefined` for any other path; in
   * report mode also with the report of what enforce mode would have done.
   */
  handler(next: NodeNext): (req: IncomingMessage, res: ServerResponse) => void
  /**
   * Connect/Express middleware, mounted before any body parser. On a request
   * that passed, `req.body` is the validated, rewritten document and
   * `req.paymentsGate` holds `{ operation, entity, principal, requestId }` (typed through Express's `Request`).
   */
  express(): ExpressMiddleware
  /** Express error-handling middleware, mounted last: thrown errors become the standard 500 body. */
  expressErrorHandler(): ExpressErrorMiddleware
  /**
   * The Fastify plugin: `app.register(gate.fastify)`. On a request that passed,
   * `request.body` is the validated, rewritten document and
   * `request.paymentsGate` holds `{ operation, entity, principal, requestId }` (typed by `payments-gate/fastify`).
   */
  readonly fastify: FastifyGatePlugin
  /**
   * Hono middleware: `app.use('/payments/*', gate.hono())`. On a request that passed,
   * `c.req.valid('json')` is the validated, rewritten document and
   * `c.get('paymentsGate')` holds `{ operation, entity, principal, requestId }` (typed by `payments-gate/hono`).
   */
  hono(): HonoGateMiddleware
  /** Answers any error of the table in the standard format: `gate.errors(res, 'entityIsNotConfigured')`. */
  errors(res: ServerResponse, errorName: ErrorName, options?: RejectOptions): void
  /** Re-reads the watched policy folder, credentials file and rules file now, as SIGHUP asks; resolves once what was read is in force. */
  reload(): Promise<void>
  /**
   * Stops watching the files, and closes retry protection's store and the throttle's Redis client when the
   * gate opened them. Close it once your server has answered its last request.
   */
  close(): Promise<void>
}

/**
 * The one place that wires payments-gate: loads the credentials and the
 * policies (and watches both), builds the checks once, and offers them as
 * handler, middleware and plugin, and as the checks and rules the proxy
 * (`createGateway`) takes. The `serve` command, its workers, the benchmarks
 * and the tests all build through here.
 */
export async function createGate(options: GateOptions): Promise<Gate> {
  // The bounds `serve` puts on its flags (docs/cli.md), before anything is opened.
  checkGateOptions(options)
  const { onStoreError } = options
  // The application's logger may not mask what it writes, as createLogger's does: the gate masks what it gives it.
  const logger = options.logger && maskingLogger(options.logger)
  // Retry protection's store first: its Redis client carries the throttle when both name that Redis.
  const retry = createHandlerStore(options)
  const shared =
    retry?.store instanceof RedisIdempotencyStore && options.throttleRedis === options.idempotency
      ? retry.store.redis
      : undefined
  // A URL's client is the gate's to close; a client given is the caller's.
  const owned =
    shared === undefined && typeof options.throttleRedis === 'string'
      ? throttleClient(options.throttleRedis, options)
      : undefined
  const redis = shared ?? owned ?? (options.throttleRedis as RedisClient | undefined)
  let users: WatchedCredentials | undefined
  let store: PolicyStore | undefined
  try {
    // With Redis, ten wrong passwords are ten across the fleet, not ten per gateway (docs/credentials.md).
    const throttle = redis && new RedisLoginThrottle(redis, { onError: onStoreError })
    if (owned !== undefined) await whenReady(owned, IDEMPOTENCY_DEFAULTS.commandTimeoutMs)
    if (retry?.store instanceof RedisIdempotencyStore) await retry.store.ready()
    if (typeof options.credentials === 'string')
      users = await watchCredentials(options.credentials, { throttle, logger, onReload: options.onCredentialsReload })
    const source = options.policies ?? DEFAULTS.policies
    if (typeof source === 'string') store = await watchPolicies(source, { logger, onReload: options.onPolicyReload })
    const rules =
      typeof options.backendErrors === 'string'
        ? await watchBackendErrors(options.backendErrors, { logger, onReload: options.onBackendErrorsReload })
        : undefined
    const watched = { users, policies: store, backendErrors: rules, redis: owned, retry }
    return assemble(
      { ...options, logger },
      users ?? (options.credentials as Authenticator),
      store ?? (source as PolicySource),
      watched,
    )
  } catch (error) {
    users?.close()
    store?.close()
    if (owned !== undefined) await closeRedisClient(owned)
    if (retry?.owned === true) await retry.store.close()
    throw error
  }
}

/** The throttle's own Redis client, made by the store's code: its errors name the gate's options. */
function throttleClient(url: string, options: GateOptions): RedisClient {
  try {
    return createRedisClient(url, { onError: options.onStoreError, ca: options.throttleRedisCa })
  } catch (error) {
    // The client's messages name the store's URL or its CA bundle (the gate gives no password): here, the gate's options.
    throw renamed(error, (option) => (option === 'idempotency' ? 'throttleRedis' : 'throttleRedisCa'))
  }
}

/** What the gate watches and owns, released by `close`. */
interface Watched {
  readonly users: WatchedCredentials | undefined
  readonly policies: PolicyStore | undefined
  readonly backendErrors: BackendErrorStore | undefined
  /** The throttle's Redis client when the gate opened it for the throttle alone. */
  readonly redis: RedisClient | undefined
  /** Retry protection's store around the handler; undefined when off. */
  readonly retry: HandlerStore | undefined
}

const RATE_STORE_FAILED = 'payments-gate: rate-limit store failed'

function assemble(options: GateOptions, authenticator: Authenticator, policies: PolicySource, watched: Watched): Gate {
  const { logger } = options
  // A policy's rate limit counted where retry protection keeps its keys: this process, or the gate's Redis (docs/middleware.md).
  const rateLimiter = rateLimiterOf(watched.retry?.store, {
    failure: options.idempotencyFailure,
    onError: options.onStoreError ?? (logger && ((error) => logger.error({ err: error }, RATE_STORE_FAILED))),
  })
  const checks = buildChecks({
    policies,
    authenticator,
    vendor: options.vendor,
    basePath: options.basePath,
    bodyLimit: options.bodyLimit,
    mode: options.mode,
    rateLimiter,
  })
  const protection = watched.retry && new HandlerProtection(checks, watched.retry, rateLimiter, options, logger)
  // A gateway built from these checks protects its payments with the same store (docs/middleware.md).
  if (protection !== undefined) lendRetryProtection(checks, protection.lent)
  const express = expressMiddleware(checks, logger, protection)
  const hono = honoMiddleware(checks, logger, protection)
  return {
    checks,
    policies,
    backendErrors: watched.backendErrors ?? (options.backendErrors as BackendErrorSource | undefined),
    handler: (next) => nodeHandler(checks, next, logger, protection),
    express: () => express,
    expressErrorHandler: () => expressErrorHandler(logger),
    fastify: fastifyPlugin(checks, logger, protection),
    hono: () => hono,
    errors: sendError,
    async reload() {
      await Promise.all([watched.policies?.reload(), watched.users?.reload(), watched.backendErrors?.reload()])
    },
    async close() {
      watched.policies?.close()
      watched.users?.close()
      watched.backendErrors?.close()
      if (watched.redis !== undefined) await closeRedisClient(watched.redis)
      await protection?.close()
    },
  }
}
