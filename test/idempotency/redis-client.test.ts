import { once } from 'node:events'
import { createRequire } from 'node:module'
import { BlockList, createServer, isIP, type Socket } from 'node:net'
import fc from 'fast-check'
import type { Redis, RedisOptions } from 'ioredis'
import t, { type Test } from 'tap'
import {
  closeRedisClient,
  createRedisClient,
  duplicateRedis,
  redisTarget,
  whenReady,
  type ClusterTarget,
} from '../../lib/idempotency/redis-client.js'
import { startFaultyProxy } from '../helpers/faulty-proxy.js'
import { CODE_POINT, runs } from '../helpers/fuzz.js'
import { ask, startRedis, type RedisServer } from '../helpers/redis.js'
import { until } from '../helpers/wait.js'

const MASTER = 'payments'

/** RESP2's bulk string (the Redis protocol). */
const bulk = (text: string) => `$${Buffer.byteLength(text)}\r\n${text}\r\n`
const array = (...items: string[]) => `*${items.length}\r\n${items.map(bulk).join('')}`

/** The commands in `buffer`, each an array of bulk strings as clients send them, and the bytes left over. */
function commands(buffer: string): { done: string[][]; rest: string } {
  const done: string[][] = []
  const line = /^\*(\d+)\r\n/
  let rest = buffer
  for (let head = line.exec(rest); head !== null; head = line.exec(rest)) {
    let at = head[0].length
    const args: string[] = []
    for (let i = 0; i < Number(head[1]); i++) {
      const size = /^\$(\d+)\r\n/.exec(rest.slice(at))
      if (size === null || rest.length < at + size[0].length + Number(size[1]) + 2) return { done, rest }
      at += size[0].length
      args.push(rest.slice(at, at + Number(size[1])))
      at += Number(size[1]) + 2
    }
    done.push(args)
    rest = rest.slice(at)
  }
  return { done, rest }
}

/**
 * A Sentinel of the test's own, so that the test says when it answers: where the primary is (`primaryPort`), no
 * other Sentinels, and `+switch-master` to its subscribers when told. While `hold` is set, the next question for
 * the primary waits for `release`.
 */
async function fakeSentinel(primaryPort: number) {
  const subscribers = new Set<Socket>()
  const sockets = new Set<Socket>()
  let held: (() => void) | undefined
  let questionHeld = () => {}
  const heldQuestion = new Promise<void>((resolve) => (questionHeld = resolve))
  const state = { hold: false, asked: 0, heldQuestion }
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => {
      sockets.delete(socket)
      subscribers.delete(socket)
    })
    socket.on('error', () => {})
    let buffer = ''
    socket.on('data', (chunk) => {
      const { done, rest } = commands(buffer + chunk.toString('latin1'))
      buffer = rest
      for (const [name, sub] of done.map((args) => args.map((arg) => arg.toLowerCase()))) {
        if (name === 'sentinel' && sub === 'get-master-addr-by-name') {
          state.asked++
          const answer = () => socket.write(array('127.0.0.1', String(primaryPort)))
          if (!state.hold) answer()
          else {
            state.hold = false
            held = answer
            questionHeld()
          }
        } else if (name === 'sentinel') socket.write('*0\r\n')
        else if (name === 'subscribe') {
          subscribers.add(socket)
          socket.write(`*3\r\n${bulk('subscribe')}${bulk('+switch-master')}:1\r\n`)
        } else socket.write('+OK\r\n')
      }
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    port: (server.address() as { port: number }).port,
    state,
    subscribers,
    announce(): void {
      const news = `${MASTER} 127.0.0.1 ${primaryPort} 127.0.0.1 ${primaryPort}`
      for (const socket of subscribers) socket.write(`*3\r\n${bulk('message')}${bulk('+switch-master')}${bulk(news)}`)
    },
    release(): void {
      held?.()
    },
    async close(): Promise<void> {
      for (const socket of sockets) socket.destroy()
      server.close()
      await once(server, 'close')
    },
  }
}

type Sentinel = Awaited<ReturnType<typeof fakeSentinel>>

/**
 * The race of ioredis 5 this works around: `client`'s connection drops, and while the client asks the Sentinel
 * for the primary, a failover is announced; the detector of the old connection then closes the connector that
 * waits for the answer. Resolves whether ioredis ended the client, once the client is back (or 10 s have passed).
 */
async function failoverWhileReconnecting(client: Redis, sentinel: Sentinel, primaryPort: number): Promise<boolean> {
  let ended = false
  client.on('end', () => (ended = true))
  const id = await client.client('ID')
  sentinel.state.hold = true
  await ask(primaryPort, (direct) => direct.call('CLIENT', 'KILL', 'ID', String(id)))
  await sentinel.state.heldQuestion
  const detectorsClosed = [...sentinel.subscribers].map((socket) => once(socket, 'close'))
  sentinel.announce()
  await Promise.all(detectorsClosed)
  sentinel.release()
  await until(() => ended, 10_000)
  return ended
}

/** A real primary and a Sentinel of the test's own naming it, both stopped when the test ends; undefined without Redis. */
async function primaryAndSentinel(t: Test): Promise<{ primary: RedisServer; sentinel: Sentinel } | undefined> {
  const primary = await startRedis(t)
  if (primary === undefined) return undefined
  const sentinel = await fakeSentinel(primary.port)
  t.teardown(() => sentinel.close())
  return { primary, sentinel }
}

/** A Sentinel client as the gateway makes it, connected. */
async function sentinelClient(t: Test, sentinel: Sentinel, errors: Error[]): Promise<Redis> {
  const client = createRedisClient(`redis-sentinel://127.0.0.1:${sentinel.port}/0#${MASTER}`, {
    onError: (error) => errors.push(error),
  }) as Redis
  t.teardown(() => closeRedisClient(client))
  t.ok(await whenReady(client, 10_000), 'connected to the primary the Sentinel names')
  return client
}

t.test(
  'Sentinel: a failover announced while the client asks a Sentinel for the primary does not end the client: it connects again',
  async (t) => {
    const servers = await primaryAndSentinel(t)
    if (servers === undefined) return
    const { primary, sentinel } = servers
    const errors: Error[] = []
    const client = await sentinelClient(t, sentinel, errors)
    // ioredis subscribes its failover detector once connected; the race needs it.
    t.ok(
      await until(() => sentinel.subscribers.size === 1, 10_000),
      "the failover detector listens to the Sentinel's announcements",
    )
    t.ok(
      await failoverWhileReconnecting(client, sentinel, primary.port),
      'ioredis ended the client (the race this works around: if this fails, ioredis fixed it)',
    )
    t.ok(await whenReady(client, 10_000), 'the client is connected again')
    t.equal(await client.ping(), 'PONG', 'and answers')
    t.ok(sentinel.state.asked >= 3, 'having asked the Sentinel where the primary is once more')
    t.ok(
      errors.some((error) => error.message === 'Connection is closed.'),
      "ioredis's error was reported, so that it is logged",
    )
  },
)

t.test(
  "Sentinel: the store's other connections (duplicateRedis, for writes that wait for replicas) connect again too",
  async (t) => {
    const servers = await primaryAndSentinel(t)
    if (servers === undefined) return
    const { primary, sentinel } = servers
    const client = await sentinelClient(t, sentinel, [])
    const connection = duplicateRedis(client, { commandTimeoutMs: 500, onError: () => {} })
    t.teardown(() => closeRedisClient(connection))
    t.ok(await whenReady(connection, 10_000), 'the other connection is made')
    t.equal(connection.options.commandTimeout, 500, 'with its own command timeout')
    t.ok(await until(() => sentinel.subscribers.size === 2, 10_000), 'each connection has its failover detector')
    t.ok(await failoverWhileReconnecting(connection, sentinel, primary.port), 'ioredis ended the other connection')
    t.ok(await whenReady(connection, 10_000), 'which is connected again')
    t.equal(await connection.ping(), 'PONG', 'and answers')
    t.ok(await whenReady(client, 10_000), 'as is the first client, which the announcement made reconnect')
  },
)

t.test('a client closed by closeRedisClient stays closed, as does one without Sentinel', async (t) => {
  const servers = await primaryAndSentinel(t)
  if (servers === undefined) return
  const { primary, sentinel } = servers
  const client = createRedisClient(`redis-sentinel://127.0.0.1:${sentinel.port}/0#${MASTER}`)
  t.ok(await whenReady(client, 10_000), 'connected')
  const ended = once(client, 'end')
  await closeRedisClient(client)
  await ended
  // The gateway's listener runs before this test's: had it started the client again, it would be connecting.
  t.equal(client.status, 'end', 'not started again')

  const direct = createRedisClient(primary.url)
  t.ok(await whenReady(direct, 10_000), 'a client without Sentinel, connected')
  const directEnded = once(direct, 'end')
  direct.disconnect()
  await directEnded
  t.equal(direct.status, 'end', 'ends as ioredis ends it, however it is closed')
})

t.test(
  'closeRedisClient resolves when the connection is lost during its QUIT, or the QUIT times out: the client ends',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const proxy = await startFaultyProxy(t, redis.port)
    const lost = createRedisClient(proxy.url) as Redis
    t.ok(await whenReady(lost, 10_000), 'connected')
    const dropped = proxy.dropCommand('quit')
    await closeRedisClient(lost)
    await dropped
    t.equal(lost.status, 'end', 'ended, though its QUIT was never answered')

    const slow = createRedisClient(proxy.url, { commandTimeoutMs: 100 }) as Redis
    t.ok(await whenReady(slow, 10_000), 'connected')
    void proxy.delayReply('quit', 1000)
    await closeRedisClient(slow)
    t.ok(await until(() => slow.status === 'end', 10_000), 'ended, though its QUIT timed out')
  },
)

/** ioredis's own reading of a `redis://` or `rediss://` URL, what `new Redis(url)` connects with. */
const { parseURL } = createRequire(import.meta.url)('ioredis/built/utils/index.js') as {
  parseURL: (url: string) => { host?: string; port?: string; db?: string; username?: string; password?: string }
}

/** Userinfo and names as RFC 3986 spells them: unreserved and sub-delims characters, and escapes of any UTF-8 (or not). */
const escaped = fc.oneof(
  fc.string({ unit: CODE_POINT, minLength: 1, maxLength: 3 }).map(encodeURIComponent),
  fc.constantFrom('%ff', '%C3', '%3a', '%40', '%25'),
)
const plain = fc.string({ unit: fc.constantFrom(...("aZ09-._~!$&'()*+,;=".split('') as [string])), maxLength: 4 })
const part = fc.array(fc.oneof(plain, escaped), { maxLength: 3 }).map((parts) => parts.join(''))
const userinfo = fc
  .option(fc.tuple(part, fc.option(part)))
  .map((pair) => (pair === null ? '' : `${pair[0]}${pair[1] === null ? '' : `:${pair[1]}`}@`))
const label = fc.stringMatching(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,6}[A-Za-z0-9])?$/)
// The forms the gateway documents (docs/idempotency.md): a name, an IPv4 address or an IPv6 one in brackets (and
// brackets around text of its characters that may be none), a database from 0 to 99.
const hostPort = fc
  .tuple(
    fc.oneof(
      fc.array(label, { minLength: 1, maxLength: 3 }).map((labels) => labels.join('.')),
      fc.ipV4(),
      fc.ipV6().map((address) => `[${address}]`),
      fc.stringMatching(/^[0-9A-Fa-f:.]{0,12}$/).map((text) => `[${text}]`),
    ),
    fc.option(fc.integer({ min: 1, max: 65535 })),
  )
  .map(([host, port]) => (port === null ? host : `${host}:${port}`))
const database = fc.option(fc.integer({ min: 0, max: 99 })).map((db) => (db === null ? '' : `/${db}`))

/** ioredis's reading of `redis://` + rest, undefined where it throws (an escape that is not UTF-8). */
function ioredisReads(rest: string): ReturnType<typeof parseURL> | undefined {
  try {
    return parseURL(`redis://${rest}`)
  } catch {
    return undefined
  }
}

/** The same host: the same name, or the same IPv6 address however spelt (ioredis hands on WHATWG URL's spelling). */
function sameHost(ours: string | undefined, theirs: string | undefined): boolean {
  return ours === theirs || (isIP(ours ?? '') === 6 && isIP(theirs ?? '') === 6 && sameAddress(ours, theirs))
}

/** Two IPv6 addresses as node's `BlockList` compares them: as numbers, not as texts. */
function sameAddress(one: string | undefined, other: string | undefined): boolean {
  const list = new BlockList()
  list.addAddress(one as string, 'ipv6')
  return list.check(other as string, 'ipv6')
}

/** Whether a host, port and credentials read by us are those ioredis reads (an empty user or password is none to both). */
function sameNode(
  ours: { host?: string; port?: number; username?: string; password?: string },
  theirs: ReturnType<typeof parseURL>,
  defaultPort: number,
): boolean {
  return (
    sameHost(ours.host, theirs.host) &&
    ours.port === Number(theirs.port ?? defaultPort) &&
    (ours.username ?? '') === (theirs.username ?? '') &&
    (ours.password ?? '') === (theirs.password ?? '')
  )
}

t.test('a redis:// URL is read as ioredis reads it: host, port, database, user and password', async (t) => {
  const url = fc.tuple(fc.constantFrom('redis', 'rediss'), userinfo, hostPort, database)
  fc.assert(
    fc.property(url, ([scheme, credentials, node, db]) => {
      const ours = redisTarget(`${scheme}://${credentials}${node}${db}`) as RedisOptions | undefined
      const theirs = ioredisReads(`${credentials}${node}${db}`)
      if (theirs === undefined) return ours === undefined
      return (
        ours !== undefined &&
        sameNode(ours, theirs, 6379) &&
        ours.db === Number(theirs.db ?? 0) &&
        (ours.tls !== undefined) === (scheme === 'rediss')
      )
    }),
    runs(),
  )
})

t.test(
  'Sentinel and Cluster URLs: each node and the credentials as ioredis reads them in a redis:// URL',
  async (t) => {
    const nodes = fc.array(hostPort, { minLength: 1, maxLength: 3 })
    const name = fc.array(fc.oneof(plain, escaped, fc.constantFrom(':', '@')), { minLength: 1, maxLength: 3 })
    fc.assert(
      fc.property(fc.boolean(), userinfo, nodes, database, name, (sentinel, credentials, list, db, parts) => {
        const master = parts.join('')
        const spec = sentinel
          ? `redis-sentinel://${credentials}${list.join(',')}${db}#${master}`
          : `redis-cluster://${credentials}${list.join(',')}`
        const ours = redisTarget(spec) as (RedisOptions & ClusterTarget) | undefined
        const theirs = list.map((node) => ioredisReads(`${credentials}${node}${db}`))
        let named: string | undefined
        try {
          named = decodeURIComponent(new URL(`redis://h#${master}`).hash.slice(1))
        } catch {
          named = undefined
        }
        if (theirs.includes(undefined) || (sentinel && named === undefined)) return ours === undefined
        if (ours === undefined) return master === '' && sentinel
        const read = sentinel ? (ours.sentinels as { host: string; port: number }[]) : ours.cluster
        const defaultPort = sentinel ? 26379 : 6379
        return (
          read.length === list.length &&
          read.every((node, at) =>
            sameNode({ ...ours, ...node }, theirs[at] as ReturnType<typeof parseURL>, defaultPort),
          ) &&
          (!sentinel || (ours.name === named && ours.db === Number(theirs[0]?.db ?? 0)))
        )
      }),
      runs(),
    )
  },
)
