import type { RateLimit } from '../policy/policy.js'
import type { Count, RateLimitStore } from './limiter.js'

/** One entity's payments in the window: their times (ms) and ids, oldest first, from `head` on. */
class Log {
  readonly times: number[] = []
  readonly ids: string[] = []
  head = 0
}

export interface MemoryRateLimitStoreOptions {
  /** The clock, in ms; for tests. Default `performance.now`: monotonic, so a clock set back changes nothing. */
  readonly now?: () => number
}

/**
 * The payments of each entity counted in this process alone (`--idempotency memory` or `off`): the time of each
 * payment admitted in the window, so that at most `payments` are in any `seconds` (a sliding window, not a
 * fixed one that admits twice as many around its boundary). Every call is synchronous: no other payment
 * is counted between the look and the count.
 */
export class MemoryRateLimitStore implements RateLimitStore {
  readonly #logs = new Map<string, Log>()
  readonly #now: () => number

  constructor(options: MemoryRateLimitStoreOptions = {}) {
    this.#now = options.now ?? (() => performance.now())
  }

  take(entity: string, limit: RateLimit, id: string): Count {
    const now = this.#now()
    const windowMs = limit.seconds * 1000
    let log = this.#logs.get(entity)
    if (log === undefined) this.#logs.set(entity, (log = new Log()))
    const { times, ids } = log
    let head = log.head
    while (head < times.length && (times[head] as number) <= now - windowMs) head++
    // Moved down once half the list has left: each time moves once, whatever the traffic.
    if (head * 2 >= times.length) {
      times.splice(0, head)
      ids.splice(0, head)
      head = 0
    }
    log.head = head
    let counted = times.length - head
    const admitted = counted < limit.payments
    if (admitted) {
      times.push(now)
      ids.push(id)
      counted++
    }
    // After a lowered limit more may be counted than it allows: the next is admitted once enough have left.
    const leaving = times[head + Math.max(0, counted - limit.payments)] as number
    return { admitted, counted, waitMs: leaving + windowMs - now }
  }

  refund(entity: string, id: string): void {
    const log = this.#logs.get(entity)
    if (log === undefined) return
    const at = log.ids.lastIndexOf(id)
    if (at < log.head) return
    log.times.splice(at, 1)
    log.ids.splice(at, 1)
  }
}
