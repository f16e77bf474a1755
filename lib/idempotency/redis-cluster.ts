import type { Cluster, Redis } from 'ioredis'
import { CodedError } from '../coded-error.js'
import type { Metrics } from '../metrics.js'
import { ioredis, whenReady, type NatMap } from './redis-client.js'

/**
 * What a Redis Cluster node answers for a command it did not run: the slot is another node's (`MOVED`), is moving
 * to another node that has this key (`ASK`), is moving with some of the command's keys already gone (`TRYAGAIN`),
 * or has no primary (`CLUSTERDOWN`). The cluster specification, redirection and resharding.
 */
export type RedirectionKind = 'moved' | 'ask' | 'tryagain' | 'clusterdown'

/** One of those answers: its kind and, for `MOVED` and `ASK`, the node named (as the cluster announces it). */
export interface Redirection {
  readonly kind: RedirectionKind
  readonly node: string
}

const REDIRECTION = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b(?: \d+ (\S+))?/

/** The redirection an error is, when it is one. */
export function redirection(error: unknown): Redirection | undefined {
  const match = error instanceof Error ? REDIRECTION.exec(error.message) : null
  if (match === null) return undefined
  return { kind: (match[1] as string).toLowerCase() as RedirectionKind, node: match[2] ?? '' }
}

/** Whether an error says that its command did not run (a redirection): sending it again, anywhere, is safe. */
export function notRun(error: unknown): boolean {
  return redirection(error) !== undefined
}

/** What the Redis Cluster store tells the gateway's metrics (docs/logs-and-metrics.md). */
export type ClusterMetrics = Pick<Metrics, 'storeRedirection' | 'storeNodeError' | 'storeClusterSlots'>

/** A node's pool of connections for acknowledged writes (redis.ts): one write and its `WAIT` on each at a time. */
export interface NodeWriters<C extends Redis> {
  with<T>(key: string, run: (connection: C) => Promise<T>): Promise<T>
  ready(timeoutMs: number): Promise<boolean[]>
  close(): Promise<void>
}

/**
 * How many nodes a write is sent to at most: the owner the slot map names, the one a `MOVED` names (the map was
 * old), the one an `ASK` names (the slot is moving).
 */
const HOPS = 3

/**
 * The writes that wait for replicas, on a Redis Cluster. `WAIT` counts the replicas that acknowledged the writes of
 * its own connection, on the node it is sent to, so it must follow the write on the connection that carried it, to
 * the primary that owns the key; a Cluster client has one connection per node, on which a waiting `WAIT` would hold
 * up every other command this process sends to that shard, and its own `wait()` goes to a random node. So each
 * primary gets a pool of connections of its own (redis.ts's, eight): a write takes one, is sent to the primary the
 * cluster's slot map names for its key, and its `WAIT` follows on that connection. A `MOVED` or an `ASK` (the write
 * did not run) sends it again to the node named (with `ASKING` first for an `ASK`), `HOPS` nodes at most; a
 * `MOVED` also has the Cluster client read the slot map again. The pools follow the primaries the client knows:
 * one is opened for each new primary, and closed when its node is no longer one.
 */
export class ShardWriters<C extends Redis> {
  readonly #cluster: Cluster
  readonly #open: (node: { host: string; port: number }) => NodeWriters<C>
  readonly #onRedirection: ((kind: RedirectionKind, node: string) => void) | undefined
  readonly #pools = new Map<string, NodeWriters<C>>()
  readonly #slot: (key: string) => number

  constructor(
    cluster: Cluster,
    open: (node: { host: string; port: number }) => NodeWriters<C>,
    onRedirection?: (kind: RedirectionKind, node: string) => void,
  ) {
    this.#cluster = cluster
    this.#open = open
    this.#onRedirection = onRedirection
    // The slot of a key as ioredis's own routing computes it (the cluster specification's CRC16 of its hash tag).
    const { Command } = ioredis()
    this.#slot = (key) => new Command('exists', [key]).getSlot()
    cluster.on('refresh', () => this.#follow())
  }

  /** Resolves, once the Cluster client is ready, with whether each connection to each primary is ready. */
  async ready(timeoutMs: number): Promise<boolean[]> {
    if (!(await whenReady(this.#cluster, timeoutMs))) return [false]
    this.#follow()
    return (await Promise.all([...this.#pools.values()].map((pool) => pool.ready(timeoutMs)))).flat()
  }

  async with<T>(key: string, run: (connection: C) => Promise<T>): Promise<T> {
    let node = this.#cluster.slots[this.#slot(key)]?.[0]
    let asking = false
    for (let hop = 1; ; hop++) {
      if (node === undefined) {
        this.#cluster.refreshSlotsCache()
        throw new CodedError('ENOTCONNECTED', 'the Redis Cluster names no primary for the key: the write was not sent')
      }
      try {
        return await this.#pool(node).with(key, async (connection) => {
          // A primary gone (a failover): its replacement is found when the slot map is read again.
          if (connection.status !== 'ready') this.#cluster.refreshSlotsCache()
          if (asking) await connection.asking()
          return run(connection)
        })
      } catch (error) {
        const redirected = redirection(error)
        if (redirected === undefined || hop === HOPS || redirected.node === '') throw error
        this.#onRedirection?.(redirected.kind, redirected.node)
        if (redirected.kind === 'moved') this.#cluster.refreshSlotsCache()
        node = this.#mapped(redirected.node)
        asking = redirected.kind === 'ask'
      }
    }
  }

  /** Closes every pool. The Cluster client is closed first or with it: it reads no slot map after (its `refresh`). */
  async close(): Promise<void> {
    const pools = [...this.#pools.values()]
    this.#pools.clear()
    await Promise.all(pools.map((pool) => pool.close()))
  }

  /** A pool for each primary the Cluster client knows now; none for a node that is no longer one. */
  #follow(): void {
    const primaries = new Set(this.#cluster.nodes('master').map(({ options }) => `${options.host}:${options.port}`))
    for (const node of primaries) this.#pool(node)
    for (const [node, pool] of this.#pools) {
      if (primaries.has(node)) continue
      this.#pools.delete(node)
      void pool.close()
    }
  }

  #pool(node: string): NodeWriters<C> {
    let pool = this.#pools.get(node)
    if (pool === undefined) {
      const colon = node.lastIndexOf(':')
      pool = this.#open({ host: node.slice(0, colon), port: Number(node.slice(colon + 1)) })
      this.#pools.set(node, pool)
    }
    return pool
  }

  /** A node as the cluster announces it (`MOVED`, `ASK`), as this process reaches it (the client's `natMap`). */
  #mapped(node: string): string {
    const to = (this.#cluster.options.natMap as NatMap | undefined)?.[node]
    return to === undefined ? node : `${to.host}:${to.port}`
  }
}

/** How often the Cluster client asks a node for the cluster's state (`CLUSTER INFO`), in ms. */
const STATE_INTERVAL_MS = 5000

/** The slots of a Redis Cluster (the cluster specification). */
const SLOTS = 16_384

/** The slots by state, as `CLUSTER INFO` counts them; `unreachable`, every slot, when no node answered. */
export type ClusterSlots = Readonly<Record<'ok' | 'pfail' | 'fail' | 'unassigned' | 'unreachable', number>>

const FIELDS = {
  assigned: /^cluster_slots_assigned:(\d+)/m,
  ok: /^cluster_slots_ok:(\d+)/m,
  pfail: /^cluster_slots_pfail:(\d+)/m,
  fail: /^cluster_slots_fail:(\d+)/m,
}

/** The slots by state of a `CLUSTER INFO` answer. */
export function clusterSlots(info: string): ClusterSlots {
  const field = (name: keyof typeof FIELDS) => Number(FIELDS[name].exec(info)?.[1] ?? 0)
  return {
    ok: field('ok'),
    pfail: field('pfail'),
    fail: field('fail'),
    unassigned: SLOTS - field('assigned'),
    unreachable: 0,
  }
}

const UNREACHABLE: ClusterSlots = Object.freeze({ ok: 0, pfail: 0, fail: 0, unassigned: 0, unreachable: SLOTS })

/**
 * Tells `metrics` what the Cluster client meets: each error of a node, by node; each redirection its commands
 * follow, by kind and node named; and the slots by state, asked every `intervalMs` while the client runs.
 */
export function observeCluster(cluster: Cluster, metrics: ClusterMetrics, intervalMs = STATE_INTERVAL_MS): void {
  cluster.on('node error', (_error: Error, node: string) => metrics.storeNodeError(node))
  // Every error of a command the Cluster client routes passes through here, before it follows a redirection.
  const handle = cluster.handleError.bind(cluster)
  cluster.handleError = (error, ttl, handlers) => {
    const redirected = redirection(error)
    if (redirected !== undefined) metrics.storeRedirection(redirected.kind, redirected.node)
    handle(error, ttl, handlers)
  }
  const ask = () =>
    void cluster.cluster('INFO').then(
      (info) => metrics.storeClusterSlots(clusterSlots(info as string)),
      () => metrics.storeClusterSlots(UNREACHABLE),
    )
  const timer = setInterval(ask, intervalMs).unref()
  cluster.on('ready', ask)
  cluster.once('end', () => clearInterval(timer))
}
