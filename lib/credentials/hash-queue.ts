/**
 * The bound on password hashing (docs/credentials.md, the bound on hashing):
 * at most `concurrency` hashes run at once and at most `queueMax` wait for a
 * turn; beyond that a check is answered at once instead of waiting longer and
 * longer. Waiting checks are queued per client address and served one address
 * after the other, and one known address holds at most `clientQueueMax` of
 * the waiting places, so a flood from one client waits behind itself, not in
 * front of everybody else's first login. It never looks at the username, so
 * known and unknown usernames meet the same bound.
 */
export class HashQueue {
  readonly #concurrency: number
  readonly #queueMax: number
  readonly #clientQueueMax: number
  #running = 0
  #waiting = 0
  /** Waiting turns per client address; the Map's order is the round: a served address goes to its end. */
  readonly #queues = new Map<string, (() => void)[]>()

  constructor(concurrency: number, queueMax: number, clientQueueMax: number) {
    this.#concurrency = concurrency
    this.#queueMax = queueMax
    this.#clientQueueMax = clientQueueMax
  }

  /** Turns taken now: hashes running, and failed checks waiting out their pad (lib/credentials/pad.ts). */
  get running(): number {
    return this.#running
  }

  /** Checks waiting for a turn. */
  get waiting(): number {
    return this.#waiting
  }

  /** Whether a check from this client (`''`: an unknown address) would have to be refused now. */
  full(client: string): boolean {
    if (this.#running < this.#concurrency) return false
    if (this.#waiting >= this.#queueMax) return true
    return client !== '' && (this.#queues.get(client)?.length ?? 0) >= this.#clientQueueMax
  }

  /**
   * A turn for a client, when the queue is not `full` for it: resolves with the
   * function that ends it (call it once), once a hash may start. `client` is
   * its address, or `''` when none is known.
   */
  enter(client: string): Promise<() => void> {
    if (this.#running < this.#concurrency) return Promise.resolve(this.#start())
    this.#waiting++
    return new Promise((resolve) => {
      const queue = this.#queues.get(client)
      const turn = () => resolve(this.#start())
      if (queue === undefined) this.#queues.set(client, [turn])
      else queue.push(turn)
    })
  }

  #start(): () => void {
    this.#running++
    return () => {
      this.#running--
      this.#next()
    }
  }

  #next(): void {
    const first = this.#queues.entries().next()
    if (first.done === true) return
    const [client, queue] = first.value
    const turn = queue.shift() as () => void
    this.#queues.delete(client)
    if (queue.length > 0) this.#queues.set(client, queue)
    this.#waiting--
    turn()
  }
}
