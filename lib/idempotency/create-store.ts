import { CodedError } from '../coded-error.js'
import { MemoryIdempotencyStore, type MemoryIdempotencyStoreOptions } from './memory.js'
import { createRedisClient, redisTarget, REDIS_URL_FORMS, shownUrl, type RedisClientOptions } from './redis-client.js'
import { RedisIdempotencyStore, type RedisIdempotencyStoreOptions } from './redis.js'

export type CreateIdempotencyStoreOptions = MemoryIdempotencyStoreOptions & RedisIdempotencyStoreOptions & RedisClientOptions

/** Throws the one-line Error (code `EIDEMPOTENCY`, exit 2 in the CLI) for a spec `createIdempotencyStore` does not take. */
export function checkIdempotencySpec(spec: string): void {
  if (spec === 'off' || spec === 'memory' || redisTarget(spec) !== undefined) return
  throw new CodedError('EIDEMPOTENCY', `--idempotency ${shownUrl(spec)} is none of memory, off, ${REDIS_URL_FORMS}`)
}

/**
 * The store `--idempotency` names: `memory` (this process), `off` (no
 * protection: undefined), or a Redis shared by every gateway on it:
 * `redis://HOST[:PORT][/DB]` (`rediss://` for TLS, `redis://:PASSWORD@HOST...`
 * for a password) or `redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER`.
 * Throws a one-line Error for anything else.
 */
export function createIdempotencyStore(
  spec: 'memory' | 'off' | string,
  options: CreateIdempotencyStoreOptions,
): MemoryIdempotencyStore | RedisIdempotencyStore | undefined {
  checkIdempotencySpec(spec)
  if (spec === 'off') return undefined
  if (spec === 'memory') return new MemoryIdempotencyStore(options)
  return new RedisIdempotencyStore(createRedisClient(spec, options), options)
}
