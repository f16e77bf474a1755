import type { Cluster, Redis } from 'ioredis'
import type { RateLimit } from '../policy/policy.js'
import { hashTag } from '../hash-tag.js'
import type { Count, RateLimitStore } from './limiter.js'

/** Every key of the rate limit starts so, under the `payments-gate:` keys the ACL grants (deploy/redis.yaml). */
export const RATE_KEY_PREFIX = 'payments-gate:rate:'

/**
 * The key of an entity's count: one per entity, the entity in a hash tag of its own, so that on a Redis
 * Cluster each entity's count is one slot (the cluster specification, hash tags), escaped as every key's
 * tag is (hash-tag.ts), so that no entity can end the tag early and no two entities spell one key.
 */
export function rateKey(entity: string): string {
  return RATE_KEY_PREFIX + hashTag(entity)
}

/**
 * One payment counted, atomically, by Redis's clock (`TIME`), so that gateways with skewed clocks count alike:
 * the payments older than the window dropped, then this one added (a member named by its id, scored with its
 * time) while fewer than the limit remain. A member already there is this very payment sent again (a client
 * that re-sends a command whose reply it lost): admitted, counted once. The key lives as long as its newest
 * payment counts. Returns whether it was admitted, how many are counted, and in how many ms the payment whose
 * leaving admits the next one (the oldest when admitted) leaves the window.
 */
const TAKE = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local counted = redis.call('ZCARD', KEYS[1])
local admitted = 0
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  admitted = 1
elseif counted < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  counted = counted + 1
  admitted = 1
end
local leaving = math.max(counted - limit, 0)
local found = redis.call('ZRANGE', KEYS[1], leaving, leaving, 'WITHSCORES')
return {admitted, counted, tonumber(found[2]) + window - now}
`

interface Scripts {
  paymentsGateRateTake(key: string, payments: number, windowMs: number, id: string): Promise<[number, number, number]>
}

/**
 * The rate limit counted in the retry-protection store's Redis (or Sentinel's primary, or a Cluster), shared by
 * every gateway on it: one script, one round trip, a payment. Uses the store's client, which fails a command
 * within its timeout while Redis is down and never sends one twice on its own, a Cluster client included
 * (redis-client.ts, `retryDelayOnFailover: 0`); were one sent twice, the payment's id would count it once. A count is not waited on by replicas: one lost in a
 * failover lets a few more payments through, and charges nothing twice.
 */
export class RedisRateLimitStore implements RateLimitStore {
  readonly #redis: Redis | Cluster

  constructor(redis: Redis | Cluster) {
    redis.defineCommand('paymentsGateRateTake', { numberOfKeys: 1, lua: TAKE })
    this.#redis = redis
  }

  async take(entity: string, limit: RateLimit, id: string): Promise<Count> {
    const scripts = this.#redis as unknown as Scripts
    const [admitted, counted, waitMs] = await scripts.paymentsGateRateTake(
      rateKey(entity),
      limit.payments,
      limit.seconds * 1000,
      id,
    )
    return { admitted: admitted === 1, counted, waitMs }
  }

  async refund(entity: string, id: string): Promise<void> {
    // Safe to repeat: a member removed is removed.
    await this.#redis.zrem(rateKey(entity), id)
  }
}
