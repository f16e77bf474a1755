/** A payment on its way to the backend, as the drain sees it (payment-relay.ts). */
export interface CallInFlight {
  /** Ends it now: withdrawn when not yet written, else told and recorded as the unknown outcome. */
  cut(): void
}

/**
 * The payments a forwarder handed to the backend and whose calls are not over, whether or not their
 * clients are still there: the drain waits for them, so that each answer is recorded, and cuts those
 * left at its deadline (docs/deployment-reference.md, stopping).
 */
export class PaymentsInFlight {
  readonly #calls = new Set<CallInFlight>()
  readonly #waiting: (() => void)[] = []

  add(call: CallInFlight): void {
    this.#calls.add(call)
  }

  delete(call: CallInFlight): void {
    this.#calls.delete(call)
    if (this.#calls.size === 0 && this.#waiting.length > 0) for (const resolve of this.#waiting.splice(0)) resolve()
  }

  /** Resolves once no call is left. */
  settled(): Promise<void> {
    if (this.#calls.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  /** Cuts every call left; each leaves the set as it settles. */
  cut(): void {
    for (const call of this.#calls) call.cut()
  }
}
