import { once } from 'node:events'
import { createServer, type Socket } from 'node:net'
import type { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { closeRedisClient, createRedisClient, duplicateRedis, whenReady } from '../../lib/idempotency/redis-client.js'
import { startFaultyProxy } from '../helpers/faulty-proxy.js'
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
