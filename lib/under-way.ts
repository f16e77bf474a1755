/**
 * How many of something are under way, and the waits for none to be left: the drain's, which closes the backend
 * pool and retry protection's store only after the last (docs/deployment-reference.md, stopping). A count, not
 * a Set of them: a Set churned by every payment makes the garbage collector promote each one
 * (lib/proxy/payments-in-flight.ts).
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
