import type { Cluster, Redis } from 'ioredis'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { CodedError } from '../coded-error.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { RedisClient } from './redis-client.js'

/** The one `maxmemory-policy` that never drops a key with an expiry, and every key of the store has one (docs/idempotency.md). */
const KEEPS_EVERY_KEY = 'noeviction'

/** The `maxmemory_policy` line of an `INFO memory` answer, or undefined when it has none. */
export function evictionPolicy(info: string): string | undefined {
  const line = info.split('\r\n').find((field) => field.startsWith('maxmemory_policy:'))
  return line?.slice('maxmemory_policy:'.length)
}

/** What a connection's server was read to be, when not one that keeps every key: not read yet, or one that may evict. */
type Verdict = 'unread' | CodedError<'EEVICTION'>

/**
 * The eviction policy of every server the store writes to, read with `INFO memory` each time a connection becomes
 * ready (a Sentinel failover, a Cluster's new primary, a restart), and again `recheckMs` after each answer while it is (a
 * policy changed with `CONFIG SET`): a server that may evict keys could drop a claim in flight, and a retry of its payment
 * would be forwarded again. A claim is judged once answered (`refusalOf`): its connection asked its policy when it
 * became ready, before the claim was sent on it, so that answer is in, or the read timed out and is asked again, and
 * the claim is refused meanwhile, a store failure as any other (`--idempotency-failure`).
 */
export class EvictionWatch {
  readonly #verdicts = new Map<Redis, Verdict>()
  readonly #reads = new Set<Promise<void>>()
  readonly #recheckMs: number

  constructor(client: RedisClient, recheckMs: number = IDEMPOTENCY_DEFAULTS.policyRecheckMs) {
    this.#recheckMs = recheckMs
    if (!client.isCluster) {
      this.add(client as Redis)
      return
    }
    // Each node of a Cluster is read once connected: a replica the gateway never reaches is never read.
    const cluster = client as Cluster
    for (const node of cluster.nodes('all')) this.add(node)
    cluster.on('+node', (node: Redis) => this.add(node))
  }

  /**
   * Reads the policy of `node`'s server each time it is ready, and `recheckMs` after each answer while it is; forgets
   * it once closed for good; returns it.
   */
  add<N extends Redis>(node: N): N {
    let next: NodeJS.Timeout | undefined
    // One timer a node: a read again is asked only once the last is answered, so reads never pile up on a slow server.
    const later = () => {
      clearTimeout(next)
      next = setTimeout(ask, this.#recheckMs, false).unref()
    }
    // `fresh` on a connection just ready; a read again keeps the last verdict until its answer.
    const ask = (fresh: boolean) => {
      if (fresh) this.#verdicts.set(node, 'unread')
      const reading: Promise<void> = node
        .info('memory')
        .then(
          (info) => {
            this.#verdict(node, evictionPolicy(info))
            later()
          },
          (error: Error) => {
            // An error the server answered (NOPERM, INFO renamed away) says it will not tell: asking again at once
            // would only ask as fast as it answers.
            if (error.name === 'ReplyError') {
              this.#verdict(node, undefined)
              later()
            }
            // One that timed out is asked again, claims refused meanwhile; one lost with its connection, once it is
            // ready again. A connection going down is still `ready` while its stream no longer takes writes, and ioredis
            // refuses a command on it at once: asked again here, in the same turn, that refusal would come back for
            // ever and the event loop would never hear the connection close. So never on such a stream, and the next
            // read waits for the loop's next turn, this read unsettled until it is asked (`settled`).
            else if (node.status === 'ready' && node.stream?.writable === true) return nextTurn().then(() => ask(true))
          },
        )
        .finally(() => this.#reads.delete(reading))
      this.#reads.add(reading)
    }
    node.on('ready', () => ask(true))
    node.once('end', () => {
      clearTimeout(next)
      this.#verdicts.delete(node)
    })
    if (node.status === 'ready') ask(true)
    return node
  }

  /** Resolves once every read under way has its answer. */
  async settled(): Promise<void> {
    while (this.#reads.size > 0) await Promise.all(this.#reads)
  }

  /**
   * Why a claim answered on `connection` does not count: its server may evict, or was not read yet. A Cluster's claim
   * goes out on a node the client picks: any node so refuses it.
   */
  refusalOf(connection: unknown): CodedError<'EEVICTION'> | undefined {
    const own = (connection as RedisClient).isCluster ? this.#first() : this.#verdicts.get(connection as Redis)
    return own === 'unread' ? UNREAD : own
  }

  /** The first server read to evict (or not to say), as start-up says it; undefined while none was. */
  get evicting(): CodedError<'EEVICTION'> | undefined {
    for (const verdict of this.#verdicts.values()) if (verdict !== 'unread') return verdict
    return undefined
  }

  /** A server read to evict, else one not read yet, else undefined. */
  #first(): Verdict | undefined {
    return this.evicting ?? (this.#verdicts.size > 0 ? 'unread' : undefined)
  }

  #verdict(node: Redis, policy: string | undefined): void {
    if (policy === KEEPS_EVERY_KEY) {
      this.#verdicts.delete(node)
      return
    }
    // The server that answered, which a client through Sentinel finds for itself.
    const address = `${node.stream.remoteAddress}:${node.stream.remotePort}`
    this.#verdicts.set(
      node,
      new CodedError(
        'EEVICTION',
        policy === undefined
          ? `the Redis at ${address} does not tell its maxmemory-policy (INFO memory): a policy that evicts could drop a claim in flight and let a retry through; allow the gateway's user INFO`
          : `the Redis at ${address} may evict keys (maxmemory-policy ${policy}): a claim evicted in flight lets a retry through; set maxmemory-policy noeviction`,
      ),
    )
  }
}

/** A claim answered on a connection whose server's policy is not read yet (its read timed out, and is asked again). */
const UNREAD = new CodedError('EEVICTION', "the Redis store's maxmemory-policy is not read yet: no claim counts before")
