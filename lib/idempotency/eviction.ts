import type { Cluster, Redis } from 'ioredis'
import { CodedError } from '../coded-error.js'
import type { RedisClient } from './redis-client.js'

/** The one `maxmemory-policy` that never drops a key with an expiry, and every key of the store has one (docs/idempotency.md). */
const KEEPS_EVERY_KEY = 'noeviction'

/** The `maxmemory_policy` line of an `INFO memory` answer, or undefined when it has none. */
export function evictionPolicy(info: string): string | undefined {
  const line = info.split('\r\n').find((field) => field.startsWith('maxmemory_policy:'))
  return line?.slice('maxmemory_policy:'.length)
}

/**
 * The eviction policy of every server the store writes to, read with `INFO memory` each time a connection becomes
 * ready (a Sentinel failover, a Cluster's new primary, a restart): a server that may evict keys could drop a claim in
 * flight, and a retry of its payment would be forwarded again. While one was read so, `refusal` is the error a claim
 * fails with, a store failure as any other (`--idempotency-failure`). A claim is judged once answered: its connection
 * asked its policy when it became ready, before the claim was sent on it, so that answer is in. A connection whose
 * answer timed out is made again, so that no claim is answered on one that was not read.
 */
export class EvictionWatch {
  readonly #refusals = new Map<Redis, CodedError<'EEVICTION'>>()
  readonly #reads = new Set<Promise<void>>()
  /** The first server's refusal, as start-up says it; undefined while every server read keeps every key. */
  refusal: CodedError<'EEVICTION'> | undefined

  constructor(client: RedisClient) {
    if (!client.isCluster) {
      this.add(client as Redis)
      return
    }
    // Each node of a Cluster is read once connected: a replica the gateway never reaches is never read.
    const cluster = client as Cluster
    for (const node of cluster.nodes('all')) this.add(node)
    cluster.on('+node', (node: Redis) => this.add(node))
  }

  /** Reads the policy of `node`'s server each time it is ready, and forgets it once closed for good; returns it. */
  add<N extends Redis>(node: N): N {
    const read = () => {
      const reading: Promise<void> = node
        .info('memory')
        .then(
          (info) => this.#verdict(node, evictionPolicy(info)),
          (error: Error) => {
            if (error.message.includes('NOPERM')) this.#verdict(node, undefined)
            // A reply lost with its connection is asked again once it is ready again; one that timed out, so too.
            else if (node.status === 'ready') node.disconnect(true)
          },
        )
        .finally(() => this.#reads.delete(reading))
      this.#reads.add(reading)
    }
    node.on('ready', read)
    node.once('end', () => this.#set(node, undefined))
    if (node.status === 'ready') read()
    return node
  }

  /** Resolves once every read under way has its answer. */
  async settled(): Promise<void> {
    while (this.#reads.size > 0) await Promise.all(this.#reads)
  }

  #verdict(node: Redis, policy: string | undefined): void {
    if (policy === KEEPS_EVERY_KEY) return this.#set(node, undefined)
    // The server that answered, which a client through Sentinel finds for itself.
    const address = `${node.stream.remoteAddress}:${node.stream.remotePort}`
    this.#set(
      node,
      new CodedError(
        'EEVICTION',
        policy === undefined
          ? `the Redis at ${address} does not tell its maxmemory-policy (INFO memory): a policy that evicts could drop a claim in flight and let a retry through; allow the gateway's user INFO`
          : `the Redis at ${address} may evict keys (maxmemory-policy ${policy}): a claim evicted in flight lets a retry through; set maxmemory-policy noeviction`,
      ),
    )
  }

  #set(node: Redis, refusal: CodedError<'EEVICTION'> | undefined): void {
    if (refusal === undefined) this.#refusals.delete(node)
    else this.#refusals.set(node, refusal)
    this.refusal = this.#refusals.values().next().value
  }
}
