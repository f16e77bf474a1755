import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ErrorRequestHandler, RequestHandler } from 'express'
import type { FastifyPluginCallback } from 'fastify'
import type { Authenticator } from './checks/auth.js'
import { buildChecks, type Checks } from './checks/index.js'
import { loadCredentials } from './credentials.js'
import { DEFAULTS, IDEMPOTENCY_DEFAULTS } from './defaults.js'
import type { ErrorName, RejectOptions } from './errors.js'
import { sendError } from './http/answer.js'
import { createIdempotencyStore } from './idempotency/create-store.js'
import type { MemoryStoreReport } from './idempotency/memory.js'
import { createRetryProtection, OVERSIZED_ANSWER, UNKNOWN_OUTCOME, type RetryProtection } from './idempotency/protection.js'
import { RedisIdempotencyStore } from './idempotency/redis.js'
import type { IdempotencyStore } from './idempotency/store.js'
import { RedisLoginThrottle } from './login-throttle-redis.js'
import type { PolicySource } from './policy/policy.js'
import { watchPolicies, type PolicyStore, type ReloadOutcome } from './policy/store.js'
import { expressErrorHandler, expressMiddleware } from './surfaces/express.js'
import { fastifyPlugin, type FastifyGateOptions } from './surfaces/fastify.js'
import { nodeHandler, type NodeNext } from './surfaces/node.js'
import type { GateLogger } from './surfaces/shared.js'

/**
 * The options of `createGate`, the same as `payments-gate serve`'s (docs/cli.md).
 * Every other options type of the library picks from this one.
 */
export interface GateOptions {
  /** A folder of `<entity>.json` policy files, loaded and then watched; or your own source of policies. Default `./policies`. */
  policies?: string | PolicySource
  /** A credentials file (`{"users": [...]}` with hashes from `payments-gate hash-password`); or your own authenticator. */
  credentials: string | Authenticator
  /** The `<vendor>` in the media types. Default `example`. */
  vendor?: string
  /** Prefix in front of `/payments/...`. Default empty. */
  basePath?: string
  /** Largest body read, in bytes. Default 65536. */
  bodyLimit?: number
  /** A pino logger for policy reloads, refused policy files and internal errors. Default: silent. */
  logger?: GateLogger
  /** Called after every reload of a watched policy folder (the gateway counts them in its metrics). */
  onPolicyReload?: (outcome: ReloadOutcome) => void
  /** How long the backend may stay silent, in ms; retry protection holds a key in flight for twice this plus 5 s. Default 30000. */
  timeout?: number
  /**
   * Retry protection on `transactionReference` (docs/idempotency.md), run by the
   * proxy: `memory` (this process, the default), `off`, a `redis://HOST:PORT[/DB]`
   * URL shared by every replica (which also shares the failed-login throttle),
   * or your own store.
   */
  idempotency?: 'memory' | 'off' | string | IdempotencyStore
  /** How long a recorded answer is replayed, in seconds. Default 86400. */
  idempotencyTtl?: number
  /** When the store cannot be reached: `closed` refuses with 503 (the default), `open` forwards unprotected. */
  idempotencyFailure?: 'closed' | 'open'
  /** Told of every failure of the retry-protection store or the shared throttle (the gateway logs and counts them). */
  onStoreError?: (error: unknown) => void
  /** The memory store's bounds: most keys (default 1000000) and most bytes (default 64 MiB). */
  idempotencyMaxEntries?: number
  idempotencyMaxBytes?: number
  /** Told of the memory store's evictions and how far back it remembers (the gateway logs and exports them). */
  idempotencyReport?: MemoryStoreReport
}

/** The checks of docs/checks.md, built once, in the shapes a Node service can mount. */
export interface Gate {
  /** The checks themselves, for callers that hold a whole request (e.g. a queue consumer). */
  readonly checks: Checks
  /** The policies in force: the watched folder's, or the source given. */
  readonly policies: PolicySource
  /** How long the backend may stay silent, in ms: the proxy's timeout. */
  readonly timeout: number
  /** Retry protection, which the proxy runs around every forwarded payment; undefined when off. */
  readonly retryProtection: RetryProtection | undefined
  /**
   * A `node:http` request handler: refusals are answered; every other request
   * goes to `next`, with the passed request (document, operation, entity,
   * principal) for the two operations, or `undefined` for any other path.
   */
  handler(next: NodeNext): (req: IncomingMessage, res: ServerResponse) => void
  /**
   * Connect/Express middleware, mounted before any body parser. On a request
   * that passed, `req.body` is the validated, rewritten document and
   * `req.paymentsGate` holds `{ operation, entity, principal }`.
   */
  express(): RequestHandler
  /** Express error-handling middleware, mounted last: thrown errors become the standard 500 body. */
  expressErrorHandler(): ErrorRequestHandler
  /**
   * The Fastify plugin: `app.register(gate.fastify)`. On a request that passed,
   * `request.body` is the validated, rewritten document and
   * `request.paymentsGate` holds `{ operation, entity, principal }`.
   */
  readonly fastify: FastifyPluginCallback<FastifyGateOptions>
  /** Answers any error of the table in the standard format: `gate.errors(res, 'entityIsNotConfigured')`. */
  errors(res: ServerResponse, errorName: ErrorName, options?: RejectOptions): void
  /** Stops watching the policy folder and releases what the gate holds. */
  close(): Promise<void>
}

/**
 * The one place that wires payments-gate: loads the credentials and the
 * policies (and watches them), builds the checks once, and offers them as
 * handler, middleware and plugin. The proxy (`createGateway`), the `serve`
 * command, its workers, the benchmarks and the tests all build through here.
 */
export async function createGate(options: GateOptions): Promise<Gate> {
  const { logger, onStoreError } = options
  const timeout = options.timeout ?? DEFAULTS.timeout
  const idempotency = options.idempotency ?? IDEMPOTENCY_DEFAULTS.store
  const keys =
    typeof idempotency === 'string'
      ? createIdempotencyStore(idempotency, {
          ttlMs: (options.idempotencyTtl ?? IDEMPOTENCY_DEFAULTS.ttlSeconds) * 1000,
          inFlightMs: 2 * timeout + IDEMPOTENCY_DEFAULTS.inFlightMarginMs,
          oversizedAnswer: OVERSIZED_ANSWER,
          unknownAnswer: UNKNOWN_OUTCOME,
          maxEntries: options.idempotencyMaxEntries,
          maxBytes: options.idempotencyMaxBytes,
          report: options.idempotencyReport,
          onError: onStoreError,
        })
      : idempotency
  try {
    // With Redis, ten wrong passwords are ten across the fleet, not ten per gateway (docs/credentials.md).
    const throttle = keys instanceof RedisIdempotencyStore ? new RedisLoginThrottle(keys.redis, { onError: onStoreError }) : undefined
    if (keys instanceof RedisIdempotencyStore) await keys.ready()
    const authenticator = typeof options.credentials === 'string' ? await loadCredentials(options.credentials, { throttle }) : options.credentials
    const source = options.policies ?? DEFAULTS.policies
    const store = typeof source === 'string' ? await watchPolicies(source, { logger, onReload: options.onPolicyReload }) : undefined
    return assemble(options, authenticator, store ?? (source as PolicySource), store, timeout, keys)
  } catch (error) {
    await keys?.close()
    throw error
  }
}

function assemble(
  options: GateOptions,
  authenticator: Authenticator,
  policies: PolicySource,
  store: PolicyStore | undefined,
  timeout: number,
  keys: IdempotencyStore | undefined,
): Gate {
  const { logger } = options
  const checks = buildChecks({ policies, authenticator, vendor: options.vendor, basePath: options.basePath, bodyLimit: options.bodyLimit })
  const express = expressMiddleware(checks, logger)
  const retryProtection = keys && createRetryProtection({ store: keys, failure: options.idempotencyFailure, onStoreError: options.onStoreError })
  return {
    checks,
    policies,
    timeout,
    retryProtection,
    handler: (next) => nodeHandler(checks, next, logger),
    express: () => express,
    expressErrorHandler: () => expressErrorHandler(logger),
    fastify: fastifyPlugin(checks, logger),
    errors: sendError,
    async close() {
      store?.close()
      await retryProtection?.close()
    },
  }
}
