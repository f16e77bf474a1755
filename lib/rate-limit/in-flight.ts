/**
 * The payments one process is forwarding, capped (`--backend-max-in-flight`; docs/deployment.md, backend
 * protection): a payment takes a place before its claim and gives it back once its call to the backend is over,
 * or at once when it is not forwarded.
 */
export class InFlight {
  readonly max: number
  #count = 0

  constructor(max: number) {
    this.max = max
  }

  /** How many places are taken. */
  get count(): number {
    return this.#count
  }

  /** Takes a place; false when all `max` are taken. */
  enter(): boolean {
    if (this.#count >= this.max) return false
    this.#count++
    return true
  }

  leave(): void {
    this.#count--
  }
}
