/** A payment on its way to the backend, as the drain sees it (payment-relay.ts). */
export interface CallInFlight {
  /**
   * Ends it now: withdrawn when not yet written, else told and recorded as the unknown outcome. Returns the
   * request's id when it was written and its client had left: its log line, written then, cannot say so.
   */
  cut(): string | undefined
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
  readonly #calls = new Set<CallInFlight>()
  readonly #underWay = new UnderWay()

  add(call: CallInFlight): void {
    this.#calls.add(call)
    this.#underWay.enter()
  }

  /** A relay settles once, added or not (withdrawn before its dispatch). */
  delete(call: CallInFlight): void {
    if (this.#calls.delete(call)) this.#underWay.leave()
  }

  /** Resolves once no call is left. */
  settled(): Promise<void> {
    return this.#underWay.settled()
  }

  /** Cuts every call left, each leaving the set as it settles; returns the ids of those whose clients had left. */
  cut(): string[] {
    const unlogged: string[] = []
    for (const call of this.#calls) {
      const id = call.cut()
      if (id !== undefined) unlogged.push(id)
    }
    return unlogged
  }
}
