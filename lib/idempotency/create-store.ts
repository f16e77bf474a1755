import { MemoryIdempotencyStore, type MemoryIdempotencyStoreOptions } from './memory.js'
import { createRedisClient, type RedisClientOptions } from './redis-client.js'
import { RedisIdempotencyStore } from './redis.js'

export type CreateIdempotencyStoreOptions = MemoryIdempotencyStoreOptions & RedisClientOptions

const SPEC = /^rediss?:\/\/(?:[^@/]*@)?[^:@/]+(?::[1-9][0-9]{0,4})?(?:\/(?:0|[1-9][0-9]?))?$/

/** The spec as it may be shown: a password in its URL is hidden. */
function shown(spec: string): string {
  return JSON.stringify(spec.replace(/\/\/[^@/]*@/, '//***@'))
}

/**
 * The store `--idempotency` names: `memory` (this process), `off` (no
 * protection: undefined), or `redis://HOST[:PORT][/DB]` (`rediss://` for TLS,
 * `redis://:PASSWORD@HOST...` for a password), shared by every gateway on that
 * Redis. Throws a one-line Error for anything else.
 */
export function createIdempotencyStore(
  spec: 'memory' | 'off' | string,
  options: CreateIdempotencyStoreOptions,
): MemoryIdempotencyStore | RedisIdempotencyStore | undefined {
  if (spec === 'off') return undefined
  if (spec === 'memory') return new MemoryIdempotencyStore(options)
  if (!SPEC.test(spec)) {
    // The code makes it a start-up failure of the CLI: one line, exit 2.
    throw Object.assign(new Error(`--idempotency ${shown(spec)} is none of memory, off, redis://HOST:PORT[/DB]`), { code: 'EIDEMPOTENCY' })
  }
  return new RedisIdempotencyStore(createRedisClient(spec, options), options)
}
