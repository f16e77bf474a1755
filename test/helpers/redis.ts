import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { connect } from 'node:net'
import type { Test } from 'tap'
import { freePort } from './servers.js'

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
}

const MISSING =
  '!!! redis-server is not on PATH: the Redis tests cannot run. Install it (Debian: apt-get install -y redis-server redis-sentinel; npm test does so as root, test/before.ts).'

/** Whether `redis-server` can be run on this machine. */
function haveRedis(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).error === undefined
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

function spawnRedis(port: number): ChildProcess {
  // No persistence: nothing written to disk, and a restart comes back empty.
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no']
  return spawn('redis-server', args, { stdio: 'ignore' })
}

async function waitForPong(port: number, child: ChildProcess): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt++) {
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
export async function startRedis(t: Test): Promise<RedisServer | undefined> {
  if (!haveRedis()) {
    if (process.env.CI !== 'true' && process.env.PAYMENTS_GATE_SKIP_REDIS === '1') {
      t.comment(MISSING)
      t.skip(`${MISSING} Skipped: PAYMENTS_GATE_SKIP_REDIS=1`, () => {})
    } else t.fail(`${MISSING} (set PAYMENTS_GATE_SKIP_REDIS=1 to skip them outside CI)`)
    return undefined
  }
  const port = await freePort()
  let child: ChildProcess | undefined
  const stop = async () => {
    const running = child
    child = undefined
    if (running === undefined || running.exitCode !== null) return
    const exited = new Promise((resolve) => running.once('exit', resolve))
    running.kill('SIGCONT')
    running.kill('SIGTERM')
    await exited
  }
  const start = async () => {
    await stop()
    child = spawnRedis(port)
    await waitForPong(port, child)
  }
  t.teardown(stop)
  await start()
  return {
    url: `redis://127.0.0.1:${port}/0`,
    port,
    stop,
    restart: start,
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
  }
}
