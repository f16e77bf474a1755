import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { until } from './wait.js'
import { endsWithThisProcess, freePort } from './servers.js'

export interface RedisServer {
  /** `redis://127.0.0.1:PORT/0` */
  readonly url: string
  readonly port: number
  /** Stops the server; resolves once it exited. Safe to call twice. */
  stop(): Promise<void>
  /** Starts it again on the same port, empty (nothing is persisted); resolves once it answers PING. */
  restart(): Promise<void>
  /** Freezes the server (SIGSTOP): connections stay open and nothing answers, as with a hung Redis. */
  freeze(): void
  /** Lets a frozen server run again (SIGCONT). */
  thaw(): void
  /** Kills the server outright (SIGKILL), as a lost node; resolves once it exited. */
  kill(): Promise<void>
}

export interface RedisOptions {
  /** Starts a replica of this server, and waits until its replication link is up. */
  replicaOf?: RedisServer
  /** More of `redis-server`'s options, as its command line takes them. */
  args?: readonly string[]
}

export interface SentinelServer {
  readonly port: number
  /** The name of the primary it watches. */
  readonly master: string
  /** `redis-sentinel://127.0.0.1:PORT/0#MASTER` */
  readonly url: string
  /** Where the Sentinel says the primary is now. */
  primaryPort(): Promise<number>
}

const MISSING =
  '!!! redis-server is not on PATH: the Redis tests cannot run. Install it (Debian: apt-get install -y redis-server redis-sentinel; npm test does so as root, test/before.ts).'

let haveRedisServer: boolean | undefined
/** Whether `redis-server` can be run on this machine: asked once a process (a spawnSync blocks the tests meanwhile). */
function haveRedis(): boolean {
  haveRedisServer ??= spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).error === undefined
  return haveRedisServer
}

/**
 * Whether the Redis tests can run: without `redis-server` the test fails, loudly, unless
 * PAYMENTS_GATE_SKIP_REDIS=1 outside CI, where it is skipped as loudly.
 */
export function redisRuns(t: Test): boolean {
  if (haveRedis()) return true
  if (process.env.CI !== 'true' && process.env.PAYMENTS_GATE_SKIP_REDIS === '1') {
    t.comment(MISSING)
    t.skip(`${MISSING} Skipped: PAYMENTS_GATE_SKIP_REDIS=1`, () => {})
  } else t.fail(`${MISSING} (set PAYMENTS_GATE_SKIP_REDIS=1 to skip them outside CI)`)
  return false
}

/** Whether a Redis on the port answers PING with PONG. */
function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let reply = ''
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.on('error', () => done(false))
    socket.on('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      reply += chunk.toString()
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'))
    })
  })
}

/** A folder of its own for a server's files, removed when the test ends. */
export function scratch(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'payments-gate-redis-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

export function spawnRedis(port: number, dir: string, extra: readonly string[]): ChildProcess {
  // No persistence: a restart comes back empty. A replica still writes the copy it syncs from its primary: in `dir`.
  // A primary syncs a new replica at once: Redis's default waits 5 s for more replicas before a diskless sync.
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--dir',
    dir,
    '--repl-diskless-sync-delay',
    '0',
    ...extra,
  ]
  return serverProcess('redis-server', args)
}

/** A server's process (`redis-server`, or a script that execs it), ended with this one (`endsWithThisProcess`). */
export function serverProcess(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  return endsWithThisProcess(spawn(command, args, { stdio: 'ignore', ...options }))
}

/** Asks a server something through a short-lived client. */
export async function ask<T>(port: number, question: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 })
  try {
    await client.connect()
    return await question(client)
  } finally {
    client.disconnect()
  }
}

export async function waitForPong(port: number, child: ChildProcess): Promise<void> {
  // Up to 30 s: a loaded machine starts a process slowly.
  for (let attempt = 0; attempt < 1500; attempt++) {
    if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with ${child.exitCode}`)
    if (await pong(port)) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`redis-server on port ${port} did not answer PING`)
}

/**
 * A real `redis-server` on a free loopback port, stopped when the test ends.
 * Undefined when there is none on this machine: the test then fails, loudly,
 * unless PAYMENTS_GATE_SKIP_REDIS=1 outside CI, where it is skipped as loudly.
 */
export async function startRedis(t: Test, options: RedisOptions = {}): Promise<RedisServer | undefined> {
  if (!redisRuns(t)) return undefined
  let port = await freePort()
  const dir = scratch(t)
  const primary = options.replicaOf
  const extra = [
    ...(primary === undefined ? [] : ['--replicaof', '127.0.0.1', String(primary.port)]),
    ...(options.args ?? []),
  ]
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
  const stop = () => end('SIGTERM')
  const start = async () => {
    await stop()
    child = spawnRedis(port, dir, extra)
    await waitForPong(port, child)
    if (
      primary !== undefined &&
      // Up to 15 s: a loaded machine makes a replica's first sync slow. A question that fails is asked again.
      !(await until(
        () =>
          ask(port, async (client) => (await client.info('replication')).includes('master_link_status:up')).catch(
            () => false,
          ),
        15_000,
      ))
    ) {
      throw new Error(`the replica on port ${port} did not connect to its primary`)
    }
  }
  t.teardown(stop)
  // A port free a moment ago may have been taken since, by another test file running beside this one: try another.
  for (let attempt = 1; ; attempt++) {
    try {
      await start()
      break
    } catch (error) {
      if (attempt === 3 || child?.exitCode === null) throw error
      port = await freePort()
    }
  }
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    stop,
    restart: start,
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
    kill: () => end('SIGKILL'),
  }
}

/**
 * One `redis-server --sentinel` watching `primary`, on a free loopback port,
 * with a config file in a folder of its own (Sentinel rewrites it), quorum 1,
 * and a primary seen as down after `downAfterMs`. Stopped when the test ends.
 */
export async function startSentinel(t: Test, primary: RedisServer, downAfterMs = 1000): Promise<SentinelServer> {
  const port = await freePort()
  const master = 'payments'
  const dir = scratch(t)
  const config = join(dir, 'sentinel.conf')
  const lines = [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir ${dir}`,
    `sentinel monitor ${master} 127.0.0.1 ${primary.port} 1`,
    `sentinel down-after-milliseconds ${master} ${downAfterMs}`,
    `sentinel failover-timeout ${master} 10000`,
    `sentinel parallel-syncs ${master} 2`,
  ]
  writeFileSync(config, `${lines.join('\n')}\n`)
  const child = serverProcess('redis-server', [config, '--sentinel'])
  t.teardown(async () => {
    if (child.exitCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  })
  await waitForPong(port, child)
  const primaryPort = () =>
    ask(port, async (client) =>
      Number(((await client.call('SENTINEL', 'get-master-addr-by-name', master)) as string[])[1]),
    )
  // The Sentinel learns the replicas from the primary: wait until it knows them, or a failover has none to promote.
  const replicas = await until(
    () =>
      ask(port, async (client) => ((await client.call('SENTINEL', 'replicas', master)) as unknown[]).length > 0).catch(
        () => false,
      ),
    15_000,
  )
  if (!replicas) throw new Error('the Sentinel did not discover the replicas')
  return { port, master, url: `redis-sentinel://127.0.0.1:${port}/0#${master}`, primaryPort }
}
