/** A payment on its way to the backend, as the drain sees it (payment-relay.ts). */
export interface CallInFlight {
  /**
   * Ends it now: withdrawn when not yet written, else told and recorded as the unknown outcome. Returns the
   * request's id when it was written and its client had left: its log line, written then, cannot say so.
   */
  cut(): string | undefined
  /** Its index in the list of calls in flight, -1 when not in it: kept by `PaymentsInFlight` alone. */
  inFlightSlot: number
}

/**
 * How many of something are under way, and the waits for none to be left: the drain's, which closes the backend
 * pool and retry protection's store only after the last (docs/deployment-reference.md, stopping).
 */
export class UnderWay {
  #count = 0
  readonly #waiting: (() => void)[] = []

  enter(): void {
    this.#count++
  }

  /** One is over. Bound once: one function for every request. */
  readonly leave = (): void => {
    if (--this.#count === 0 && this.#waiting.length > 0) for (const resolve of this.#waiting.splice(0)) resolve()
  }

  /** Resolves once none is left. */
  settled(): Promise<void> {
    if (this.#count === 0) return Promise.resolve()
    return new Promise((resolve) => this.#waiting.push(resolve))
  }
}

/**
 * The payments a forwarder handed to the backend and whose calls are not over, whether or not their
 * clients are still there: the drain waits for them, so that each answer is recorded, and cuts those
 * left at its deadline (docs/deployment-reference.md, stopping).
 */
export class PaymentsInFlight {
  /**
   * An array, each call holding its own index, not a Set: a Set churned by a payment each is rehashed into a new
   * table every few dozen, and the old one keeps a link to it; once one table is in the old generation, every
   * table after it, and every payment it held, is promoted too, and each scavenge copies megabytes
   * (docs/performance-history.md, the in-flight list).
   */
  readonly #calls: CallInFlight[] = []
  readonly #underWay = new UnderWay()

  add(call: CallInFlight): void {
    call.inFlightSlot = this.#calls.length
    this.#calls.push(call)
    this.#underWay.enter()
  }

  /** A relay settles once, added or not (withdrawn before its dispatch). */
  delete(call: CallInFlight): void {
    const slot = call.inFlightSlot
    if (slot === -1) return
    call.inFlightSlot = -1
    const last = this.#calls.pop() as CallInFlight
    if (last !== call) {
      this.#calls[slot] = last
      last.inFlightSlot = slot
    }
    this.#underWay.leave()
  }

  /** Resolves once no call is left. */
  settled(): Promise<void> {
    return this.#underWay.settled()
  }

  /** Cuts every call left, each leaving the list as it settles; returns the ids of those whose clients had left. */
  cut(): string[] {
    const unlogged: string[] = []
    // A copy: each call leaves the list as it settles.
    for (const call of this.#calls.slice()) {
      const id = call.cut()
      if (id !== undefined) unlogged.push(id)
    }
    return unlogged
  }
}
