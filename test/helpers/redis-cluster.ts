/**
 * A real Redis Cluster on loopback for the tests (docs/idempotency-reference.md, Redis Cluster): `redis-server
 * --cluster-enabled yes` nodes, joined by `redis-cli --cluster create` (Debian's redis-tools, which
 * test/before.ts installs), three primaries with a replica each by default. Started once per test file and
 * shared by its tests, each with references of its own; every wait is a bounded poll, never a fixed sleep.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { Command, Redis } from 'ioredis'
import type { Test } from 'tap'
import type { PemFiles } from './certificates.js'
import { onPath } from './provision.js'
import { ask, redisRuns, scratch, serverProcess, spawnRedis, waitForPong } from './redis.js'
import { until } from './wait.js'
import { freePort } from './servers.js'

export interface ClusterNode {
  readonly port: number
  /** `127.0.0.1:PORT`, as the cluster announces it. */
  readonly address: string
  /** Freezes the node (SIGSTOP): connections stay open and nothing answers. */
  freeze(): void
  /** Lets a frozen node run again (SIGCONT). */
  thaw(): void
  /** Kills the node outright (SIGKILL), as a lost machine; resolves once it exited. */
  kill(): Promise<void>
  /** Starts a node that was killed again, where it was, with what it knew of the cluster; resolves once it answers PING. */
  restart(): Promise<void>
}

/** A primary, the slot ranges it serves and its replicas, as the cluster says now. */
export interface Shard {
  readonly primary: ClusterNode
  readonly id: string
  readonly slots: readonly (readonly [number, number])[]
  readonly replicas: readonly ClusterNode[]
}

export interface RedisCluster {
  /** `redis-cluster://127.0.0.1:PORT,...`: every primary the cluster started with, as seeds. */
  readonly url: string
  readonly nodes: readonly ClusterNode[]
  /** The shards as a live node says now. */
  shards(): Promise<Shard[]>
  /** The shard whose primary serves `key`'s slot now. */
  shardOf(key: string): Promise<Shard>
  /** Asks one node something through a short-lived client. */
  ask<T>(node: ClusterNode, question: (client: Redis) => Promise<T>): Promise<T>
  /** Waits until every live node agrees: state ok, every slot served, `replicas` replicas linked to their primaries. */
  settled(replicas?: number): Promise<void>
  /** Moves `slots` slots from one primary to another with `redis-cli --cluster reshard`; resolves once it exited. */
  reshard(from: Shard, to: Shard, slots: number): Promise<void>
  /**
   * Gives an empty `slot` to `to` on every primary, its claim under the cluster's newest config epoch, as a finished
   * migration's is: a claim under an older epoch is taken back by gossip the old owner sent before the move, which a
   * loaded machine delivers late. The epoch is taken before the claim, once `to` knows every node's own. Resolves
   * once every live node says `to` serves it.
   */
  moveSlot(slot: number, to: Shard): Promise<void>
}

export interface RedisClusterOptions {
  readonly primaries?: number
  readonly replicasPerPrimary?: number
  /** `cluster-node-timeout`: how long a silent node takes to be failed over. Default 1000 ms. */
  readonly nodeTimeoutMs?: number
}

/** CLUSTER INFO's epochs: the greatest the node knows of, and its own (a replica's is its primary's). */
const CURRENT_EPOCH = /^cluster_current_epoch:(\d+)/m
const OWN_EPOCH = /^cluster_my_epoch:(\d+)/m

/** The slot of a key, as the cluster specification computes it (ioredis's own routing). */
export function slotOf(key: string): number {
  return new Command('exists', [key]).getSlot()
}

const MISSING_CLI =
  '!!! redis-cli is not on PATH: the Redis Cluster tests cannot run. Install it (Debian: apt-get install -y redis-tools; npm test does so as root, test/before.ts).'

/** Runs a command to its end, bounded; rejects with its output when it fails. */
function run(command: string, args: readonly string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code) => {
      clearTimeout(timer)
      if (code === 0) resolve(output)
      else reject(new Error(`${command} ${args.join(' ')} exited with ${code}: ${output}`))
    })
  })
}

/** One node on free ports (its client port and its cluster bus port), answering PING; stopped when the test ends. */
async function startNode(t: Test, nodeTimeoutMs: number): Promise<ClusterNode> {
  const dir = scratch(t)
  let child: ChildProcess | undefined
  const end = async (signal: NodeJS.Signals) => {
    const running = child
    child = undefined
    if (running === undefined || running.exitCode !== null) return
    const exited = new Promise((resolve) => running.once('exit', resolve))
    running.kill('SIGCONT')
    running.kill(signal)
    await exited
  }
  t.teardown(() => end('SIGTERM'))
  for (let attempt = 1; ; attempt++) {
    const [port, bus] = [await freePort(), await freePort()]
    const settings = [
      ['--cluster-enabled', 'yes'],
      ['--cluster-config-file', 'nodes.conf'],
      ['--cluster-node-timeout', String(nodeTimeoutMs)],
      ['--cluster-port', String(bus)],
      // A slot without a primary stops only its own keys, not the whole cluster (docs/idempotency-reference.md, Redis Cluster).
      ['--cluster-require-full-coverage', 'no'],
      ['--cluster-allow-replica-migration', 'no'],
    ].flat()
    const start = async () => {
      child = spawnRedis(port, dir, settings)
      await waitForPong(port, child)
    }
    try {
      await start()
    } catch (error) {
      // A port free a moment ago may have been taken since, by another test file running beside this one.
      if (attempt === 3) throw error
      await end('SIGKILL')
      continue
    }
    return {
      port,
      address: `127.0.0.1:${port}`,
      freeze: () => void child?.kill('SIGSTOP'),
      thaw: () => void child?.kill('SIGCONT'),
      kill: () => end('SIGKILL'),
      restart: start,
    }
  }
}

interface NodeLine {
  readonly id: string
  readonly address: string
  readonly flags: readonly string[]
  readonly primaryId: string
  readonly slots: readonly (readonly [number, number])[]
}

/** `CLUSTER NODES`, a line a node: id, address, flags, its primary's id (replicas) and slot ranges (primaries). */
function nodeLines(text: string): NodeLine[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, primaryId, , , , , ...slots] = line.trim().split(' ') as string[]
      return {
        id: id as string,
        address: (address as string).split('@')[0] as string,
        flags: (flags as string).split(','),
        primaryId: primaryId as string,
        slots: slots
          .filter((range) => !range.startsWith('['))
          .map((range) => {
            const [first, last] = range.split('-').map(Number) as [number, number | undefined]
            return [first, last ?? first] as const
          }),
      }
    })
}

/** Asks the node on `port` something: `ask`'s short-lived client, or a poll's own (`poll`). */
type Asker = <T>(port: number, question: (client: Redis) => Promise<T>) => Promise<T>

/**
 * Polls `predicate` every 100 ms, at most `ms`, through one client a node kept for the whole poll and closed after it:
 * each round asks the same nodes, and a client a question would cost a connection and a ready check every time.
 * 100 ms is as often as a node's cluster cron runs.
 */
async function poll(predicate: (asking: Asker) => Promise<boolean>, ms: number): Promise<boolean> {
  const clients = new Map<number, Redis>()
  const asking: Asker = (port, question) => {
    let client = clients.get(port)
    if (client === undefined) {
      client = new Redis({ port, host: '127.0.0.1', enableReadyCheck: false, maxRetriesPerRequest: 0 })
      // A node that does not answer fails the question; without a listener, ioredis would print each error too.
      client.on('error', () => {})
      clients.set(port, client)
    }
    return question(client)
  }
  try {
    return await until(() => predicate(asking), ms, 100)
  } finally {
    for (const client of clients.values()) client.disconnect()
  }
}

/**
 * A Redis Cluster of real `redis-server` nodes on loopback, created with `redis-cli --cluster create` and
 * settled; every node stopped when the test ends. Undefined when this machine cannot run one: the test then
 * fails, loudly, unless PAYMENTS_GATE_SKIP_REDIS=1 outside CI (test/helpers/redis.ts).
 */
export async function startRedisCluster(t: Test, options: RedisClusterOptions = {}): Promise<RedisCluster | undefined> {
  if (!redisRuns(t)) return undefined
  if (!onPath('redis-cli', process.env.PATH)) {
    if (process.env.CI !== 'true' && process.env.PAYMENTS_GATE_SKIP_REDIS === '1') t.skip(MISSING_CLI, () => {})
    else t.fail(MISSING_CLI)
    return undefined
  }
  const { primaries = 3, replicasPerPrimary = 1, nodeTimeoutMs = 1000 } = options
  const nodes = await Promise.all(
    Array.from({ length: primaries * (1 + replicasPerPrimary) }, () => startNode(t, nodeTimeoutMs)),
  )
  const byAddress = new Map(nodes.map((node) => [node.address, node]))
  await run('redis-cli', [
    '--cluster',
    'create',
    ...nodes.map((node) => node.address),
    '--cluster-replicas',
    String(replicasPerPrimary),
    '--cluster-yes',
  ])
  const dead = new Set<ClusterNode>()
  for (const node of nodes) {
    const { kill, restart } = node
    Object.assign(node, {
      kill: async () => {
        dead.add(node)
        await kill()
      },
      restart: async () => {
        await restart()
        dead.delete(node)
      },
    })
  }
  const live = () => nodes.filter((node) => !dead.has(node))
  const lines = async (asking: Asker) =>
    nodeLines((await asking((live()[0] as ClusterNode).port, (client) => client.cluster('NODES'))) as string)
  const shards = async (asking: Asker = ask): Promise<Shard[]> => {
    const all = await lines(asking)
    return all
      .filter((line) => line.flags.includes('master') && !line.flags.includes('fail') && line.slots.length > 0)
      .map((line) => ({
        primary: byAddress.get(line.address) as ClusterNode,
        id: line.id,
        slots: line.slots,
        replicas: all
          .filter((other) => other.primaryId === line.id && !other.flags.includes('fail'))
          .map((other) => byAddress.get(other.address) as ClusterNode),
      }))
  }
  const settled = async (replicas = primaries * replicasPerPrimary) => {
    // Up to 15 s, a node that does not answer yet read as not settled: a loaded machine makes a replica's first sync slow.
    const agreed = await poll((asking) => settledNow(replicas, asking), 15_000)
    if (!agreed) throw new Error('the Redis Cluster did not settle')
  }
  const settledNow = async (replicas: number, asking: Asker): Promise<boolean> =>
    (async () => {
      for (const node of live()) {
        const info = (await asking(node.port, (client) => client.cluster('INFO'))) as string
        if (!info.includes('cluster_state:ok') || !info.includes('cluster_slots_ok:16384')) return false
        const seen = nodeLines((await asking(node.port, (client) => client.cluster('NODES'))) as string)
        const linked = seen.filter((line) => line.flags.includes('slave') && !line.flags.includes('fail'))
        if (linked.length !== replicas) return false
        if (seen.some((line) => line.flags.includes('fail?'))) return false
        if (linked.some((line) => line.flags.includes('myself'))) {
          const replication = await asking(node.port, (client) => client.info('replication'))
          if (!replication.includes('master_link_status:up')) return false
        }
      }
      return true
    })().catch(() => false)
  await settled()
  const shardOf = async (key: string) => {
    const slot = slotOf(key)
    const found = (await shards()).find((shard) => shard.slots.some(([first, last]) => slot >= first && slot <= last))
    if (found === undefined) throw new Error(`no primary serves slot ${slot}`)
    return found
  }
  /** Who each live node says serves `slot`: `PORT:OWNER-ID`, or `PORT:?` where it did not answer. */
  const ownersOf = async (slot: number, asking: Asker = ask) =>
    Promise.all(
      live().map(async (node) => {
        const seen = await asking(node.port, (client) => client.cluster('NODES')).catch(() => undefined)
        if (typeof seen !== 'string') return `${node.port}:?`
        const owner = nodeLines(seen).find((line) => line.slots.some(([first, last]) => slot >= first && slot <= last))
        return `${node.port}:${owner?.id ?? 'none'}`
      }),
    )
  /** Each live node's config epoch and the cluster's current epoch as it knows it; a node that does not answer left out. */
  const epochsOf = async (asking: Asker = ask) =>
    (
      await Promise.all(
        live().map(async (node) => {
          const info = await asking(node.port, (client) => client.cluster('INFO')).catch(() => undefined)
          if (typeof info !== 'string') return undefined
          return {
            port: node.port,
            current: Number(CURRENT_EPOCH.exec(info)?.[1]),
            own: Number(OWN_EPOCH.exec(info)?.[1]),
          }
        }),
      )
    ).filter((epochs) => epochs !== undefined)
  /**
   * Gives `to` a config epoch above every other primary's. BUMPEPOCH takes one above the greatest the node knows of,
   * or none if its own is that one (STILL): asked before the node has heard of another's newer epoch (a slot just
   * moved there), it would take one that loses. So it is asked once the node knows every node's own epoch, and again
   * until no other node has one as great (two equal epochs are told apart by Redis, which may raise the other one).
   */
  const newestEpoch = async (to: Shard) => {
    const greatest = async (asking: Asker) => {
      const epochs = await epochsOf(asking)
      const known = epochs.find(({ port }) => port === to.primary.port)?.current ?? -1
      if (epochs.some(({ own }) => own > known)) return false
      await asking(to.primary.port, (client) => client.cluster('BUMPEPOCH'))
      // A replica tells its primary's epoch: the other primaries' are the ones to be above.
      const others = new Set((await shards(asking)).filter(({ id }) => id !== to.id).map(({ primary }) => primary.port))
      const after = await epochsOf(asking)
      const mine = after.find(({ port }) => port === to.primary.port)?.own ?? -1
      return after.every(({ port, own }) => !others.has(port) || own < mine)
    }
    if (!(await poll(greatest, 15_000)))
      throw new Error(`${to.primary.address} could not take the greatest epoch: ${JSON.stringify(await epochsOf())}`)
  }
  const moveSlot = async (slot: number, to: Shard) => {
    // The epoch first: a claim sent under an older one is taken back by the first node that knows a newer owner's.
    await newestEpoch(to)
    await ask(to.primary.port, (client) => client.cluster('SETSLOT', slot, 'NODE', to.id))
    for (const shard of await shards())
      if (shard.id !== to.id) await ask(shard.primary.port, (client) => client.cluster('SETSLOT', slot, 'NODE', to.id))
    const agreed = async (asking: Asker) => (await ownersOf(slot, asking)).every((owner) => owner.endsWith(`:${to.id}`))
    if (!(await poll(agreed, 15_000)))
      throw new Error(
        `slot ${slot}: not every node says ${to.primary.address} (${to.id}) serves it: ${(await ownersOf(slot)).join(' ')}`,
      )
  }
  return {
    url: `redis-cluster://${nodes
      .slice(0, primaries)
      .map((node) => node.address)
      .join(',')}`,
    nodes,
    shards,
    shardOf,
    ask: (node, question) => ask(node.port, question),
    settled,
    reshard: async (from, to, slots) =>
      void (await run('redis-cli', [
        '--cluster',
        'reshard',
        from.primary.address,
        '--cluster-from',
        from.id,
        '--cluster-to',
        to.id,
        '--cluster-slots',
        String(slots),
        '--cluster-yes',
      ])),
    moveSlot,
  }
}

/**
 * A Redis Cluster of one primary holding every slot, TLS only (clients and cluster bus) with `server`'s certificate
 * issued by `ca`, announcing itself by `name` (`cluster-announce-hostname`, `cluster-preferred-endpoint-type
 * hostname`), as managed offerings with TLS do; stopped when the test ends. Resolves with its port, once it serves
 * every slot.
 */
export async function startTlsRedisCluster(t: Test, server: PemFiles, ca: string, name: string): Promise<number> {
  const [port, bus] = [await freePort(), await freePort()]
  const args = [
    ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1 -::1', '--save', '', '--appendonly', 'no'],
    ['--dir', scratch(t), '--tls-cert-file', server.cert, '--tls-key-file', server.key, '--tls-ca-cert-file', ca],
    ['--tls-auth-clients', 'no', '--tls-cluster', 'yes', '--cluster-enabled', 'yes', '--cluster-port', String(bus)],
    ['--cluster-config-file', 'nodes.conf', '--cluster-announce-hostname', name],
    ['--cluster-preferred-endpoint-type', 'hostname'],
  ].flat()
  const child = serverProcess('redis-server', args)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(async () => {
    if (child.exitCode === null) child.kill('SIGTERM')
    await exited
  })
  const client = new Redis({
    port,
    host: '127.0.0.1',
    tls: { ca: readFileSync(ca), servername: name },
    lazyConnect: true,
    retryStrategy: () => 20,
    maxRetriesPerRequest: 0,
  })
  client.on('error', () => {})
  try {
    const serving = async (): Promise<boolean> => {
      if (child.exitCode !== null) throw new Error(`redis-server (TLS cluster) exited with ${child.exitCode}`)
      if (client.status === 'wait') await client.connect()
      const info = (await client.cluster('INFO')) as string
      if (info.includes('cluster_slots_assigned:0')) await client.cluster('ADDSLOTSRANGE', 0, 16_383)
      return info.includes('cluster_state:ok')
    }
    const served = await until(() => serving().catch(() => false), 15_000)
    if (!served) throw new Error(`the TLS cluster node on port ${port} did not serve its slots`)
  } finally {
    client.disconnect()
  }
  return port
}
