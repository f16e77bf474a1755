/** A real `redis-server` that speaks only TLS, on loopback, with certificates made for the test. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  type AddressInfo,
  connect as connectNet,
  createServer as createNetServer,
  type Server as NetServer,
  type Socket,
} from 'node:net'
import { connect, createServer as createTlsServer } from 'node:tls'
import type { Test } from 'tap'
import type { PemFiles } from './certificates.js'
import { serverProcess } from './redis.js'
import { freePort } from './servers.js'

export interface TlsRedisServer {
  readonly port: number
  /** `rediss://127.0.0.1:PORT/0` */
  readonly url: string
}

/** Whether a TLS Redis on the port, verified against `ca` (and `servername`, when given), answers PING with PONG. */
function pong(port: number, ca: Buffer, servername: string | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', ca, servername })
    let reply = ''
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.on('error', () => done(false))
    socket.on('secureConnect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      reply += chunk.toString()
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'))
    })
  })
}

/** Runs `redis-server ARGS` (TLS only), stopped when the test ends; resolves once it answers PING over TLS on `port`. */
async function runTls(t: Test, args: readonly string[], port: number, ca: string, name?: string): Promise<void> {
  const child = serverProcess('redis-server', args)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  t.teardown(async () => {
    if (child.exitCode === null) child.kill('SIGTERM')
    await exited
  })
  const trusted = readFileSync(ca)
  // Up to 30 s: a loaded machine starts a process slowly.
  for (let attempt = 0; attempt < 1500; attempt++) {
    if (child.exitCode !== null) throw new Error(`redis-server (TLS) on port ${port} exited with ${child.exitCode}`)
    if (await pong(port, trusted, name)) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`redis-server (TLS) on port ${port} did not answer PING`)
}

function scratch(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'payments-gate-redis-tls-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/**
 * `redis-server` with no plain port (`--port 0`), TLS on a free loopback port with `server`'s certificate, clients
 * not asked for one; stopped when the test ends. `ca` is the CA that issued `server` (Redis needs one to start);
 * `name`, one of the certificate's names, when 127.0.0.1 is not.
 */
export async function startTlsRedis(t: Test, server: PemFiles, ca: string, name?: string): Promise<TlsRedisServer> {
  const port = await freePort()
  // A TLS port only, no persistence, as test/helpers/redis.ts starts a plain one.
  const args = ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
  const tls = ['--tls-cert-file', server.cert, '--tls-key-file', server.key, '--tls-ca-cert-file', ca]
  await runTls(t, [...args, ...tls, '--tls-auth-clients', 'no', '--dir', scratch(t)], port, ca, name)
  return { port, url: `rediss://127.0.0.1:${port}/0` }
}

/**
 * One Sentinel, TLS only, watching `primary` over TLS (`tls-replication yes`), quorum 1; resolves with its
 * `rediss-sentinel://127.0.0.1:PORT/0#payments` URL. Stopped when the test ends.
 */
export async function startTlsSentinel(
  t: Test,
  server: PemFiles,
  ca: string,
  primary: TlsRedisServer,
): Promise<string> {
  const port = await freePort()
  const dir = scratch(t)
  const config = join(dir, 'sentinel.conf')
  const lines = [
    'port 0',
    `tls-port ${port}`,
    'bind 127.0.0.1',
    `dir ${dir}`,
    `tls-cert-file ${server.cert}`,
    `tls-key-file ${server.key}`,
    `tls-ca-cert-file ${ca}`,
    'tls-auth-clients no',
    'tls-replication yes',
    `sentinel monitor payments 127.0.0.1 ${primary.port} 1`,
  ]
  writeFileSync(config, `${lines.join('\n')}\n`)
  await runTls(t, [config, '--sentinel'], port, ca)
  return `rediss-sentinel://127.0.0.1:${port}/0#payments`
}

/**
 * A record no TLS 1.3 peer accepts after the handshake: a plaintext alert (fatal, decode_error). Read with a first
 * flight whose certificate the client refuses, it fails the client a second time in the same read.
 */
const STRAY_RECORD = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32])

/**
 * A TLS server with `server`'s certificate, behind a relay on a loopback port that adds `STRAY_RECORD` to the
 * server's first flight, in the same write: a client that refuses the certificate then fails twice on one
 * connection, as a client of a TLS Redis once did under load (docs/reliability.md, Races found under load). Nothing
 * is ever answered past the handshake. Closed when the test ends.
 */
export async function startTwiceFailingTls(t: Test, server: PemFiles): Promise<{ readonly port: number }> {
  const tls = createTlsServer({ cert: readFileSync(server.cert), key: readFileSync(server.key) }, (socket) =>
    socket.on('error', () => {}),
  )
  tls.on('tlsClientError', () => {})
  const sockets = new Set<Socket>()
  const relay = createNetServer((client) => {
    const upstream = connectNet((tls.address() as AddressInfo).port, '127.0.0.1')
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('error', () => {})
      socket.on('close', () => {
        sockets.delete(socket)
        client.destroy()
        upstream.destroy()
      })
    }
    client.on('data', (chunk: Buffer) => upstream.write(chunk))
    // The server writes its first flight at once (loopback delivers it in one piece): the record goes with it.
    upstream.once('data', (flight: Buffer) => client.write(Buffer.concat([flight, STRAY_RECORD])))
  })
  await Promise.all([listenOn(tls), listenOn(relay)])
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await Promise.all([new Promise((resolve) => tls.close(resolve)), new Promise((resolve) => relay.close(resolve))])
  })
  return { port: (relay.address() as AddressInfo).port }
}

function listenOn(server: NetServer): Promise<void> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
}
