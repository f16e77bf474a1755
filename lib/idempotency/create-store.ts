import type { Cluster } from 'ioredis'
import { CodedError } from '../coded-error.js'
import { MemoryIdempotencyStore, type MemoryIdempotencyStoreOptions } from './memory.js'
import { shownUrl } from '../shown-url.js'
import {
  connectCluster,
  connectRedis,
  isClusterTarget,
  redisTarget,
  redisUrlProblem,
  REDIS_URL_FORMS,
  type RedisClientOptions,
} from './redis-client.js'
import { observeCluster, type ClusterMetrics } from './redis-cluster.js'
import { RedisIdempotencyStore, type RedisIdempotencyStoreOptions } from './redis.js'

export type CreateIdempotencyStoreOptions = MemoryIdempotencyStoreOptions &
  RedisIdempotencyStoreOptions &
  RedisClientOptions & {
    /** Told of a Redis Cluster's redirections, node errors and slots (the gateway exports them). */
    clusterMetrics?: ClusterMetrics
  }

/** The one-line error (code `EIDEMPOTENCY`, exit 2 in the CLI) for a spec `createIdempotencyStore` does not take. */
function unknownSpec(spec: string): CodedError<'EIDEMPOTENCY'> {
  return new CodedError(
    'EIDEMPOTENCY',
    (name) =>
      `${name('idempotency')} ${shownUrl(spec)} is none of memory, off, ${REDIS_URL_FORMS}${redisUrlProblem(spec)}`,
  )
}

/** Throws the one-line `EIDEMPOTENCY` error for a spec `createIdempotencyStore` does not take. */
export function checkIdempotencySpec(spec: string): void {
  if (spec === 'off' || spec === 'memory' || redisTarget(spec) !== undefined) return
  throw unknownSpec(spec)
}

/**
 * The store `--idempotency` names: `memory` (this process), `off` (no
 * protection: undefined), or a Redis shared by every gateway on it:
 * `redis://HOST[:PORT][/DB]` (`rediss://` for TLS, `redis://:PASSWORD@HOST...`
 * for a password), `redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER`
 * (`rediss-sentinel://` for TLS) or a Redis Cluster,
 * `redis-cluster://HOST:PORT[,HOST:PORT...]` (`rediss-cluster://` for TLS).
 * Throws a one-line Error for anything else.
 */
export function createIdempotencyStore(
  spec: 'memory' | 'off' | string,
  options: CreateIdempotencyStoreOptions,
): MemoryIdempotencyStore | RedisIdempotencyStore | undefined {
  if (spec === 'off') return undefined
  if (spec === 'memory') return new MemoryIdempotencyStore(options)
  // Read once: the client is made of what was read.
  const target = redisTarget(spec)
  if (target === undefined) throw unknownSpec(spec)
  if (!isClusterTarget(target)) return new RedisIdempotencyStore(connectRedis(target, options), options)
  const cluster: Cluster = connectCluster(target, options)
  const metrics = options.clusterMetrics
  if (metrics === undefined) return new RedisIdempotencyStore(cluster, options)
  observeCluster(cluster, metrics)
  return new RedisIdempotencyStore(cluster, {
    ...options,
    onRedirection: (kind, node) => metrics.storeRedirection(kind, node),
  })
}
