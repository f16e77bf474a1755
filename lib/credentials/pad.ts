import { SCRYPT_DEFAULTS } from '../defaults.js'
import type { ScryptParams } from './hash.js'

/**
 * How long a failed check lasts (docs/credentials.md, the time a failure
 * takes): as long as a hash at the dearest cost of the users in force,
 * whatever the username. An unknown username is hashed at that cost, as a
 * user at that cost is, and lasts what that hash takes; a failure at a
 * cheaper cost is made to last as long as the last hash timed at the
 * dearest cost, by waiting rather than hashing more, or, before one was
 * timed, as long as its own hash scaled by the two costs' work.
 */
export class FailurePad {
  #dearest: ScryptParams = SCRYPT_DEFAULTS
  #dearestMs: number | undefined

  /** The dearest cost in force: the one an unknown username is hashed at. */
  get dearest(): ScryptParams {
    return this.#dearest
  }

  /** Puts the dearest of these costs in force (the default cost when there are none); forgets the time of another. */
  install(costs: Iterable<ScryptParams>): void {
    let dearest: ScryptParams = SCRYPT_DEFAULTS
    let most = 0
    // Of costs of equal work, the first listed.
    for (const cost of costs) {
      if (work(cost) > most) [dearest, most] = [cost, work(cost)]
    }
    if (!sameCost(dearest, this.#dearest)) this.#dearestMs = undefined
    this.#dearest = dearest
  }

  /**
   * A hash at `cost` took `ms`: how long its check must last in all, from the
   * hash's start, when it fails.
   */
  measured(cost: ScryptParams, ms: number): number {
    if (sameCost(cost, this.#dearest)) {
      this.#dearestMs = ms
      return ms
    }
    return this.#dearestMs ?? (ms * work(this.#dearest)) / work(cost)
  }
}

/** scrypt's time grows with N * r * p (RFC 7914, section 6: p runs of ROMix, each of 2 * N BlockMix of 2 * r blocks). */
function work({ N, r, p }: ScryptParams): number {
  return N * r * p
}

function sameCost(a: ScryptParams, b: ScryptParams): boolean {
  return a.N === b.N && a.r === b.r && a.p === b.p
}
