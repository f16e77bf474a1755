/** Everything that listens on loopback for the tests: free ports, and the two backends behind the proxy. */
import { readFileSync } from 'node:fs'
import {
  Agent,
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http'
import {
  createConnection,
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net'
import type { ChildProcess } from 'node:child_process'
import { onExit } from 'signal-exit'
import type { Test } from 'tap'

/** Listens on 127.0.0.1 (on a free port unless one is given) and resolves with the port. */
export async function listenOnLoopback(server: NetServer, port = 0): Promise<number> {
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return (server.address() as AddressInfo).port
}

/**
 * `child`, killed when this process ends if it is still running: tap ends a test file that ran out of time without its
 * teardowns, and a server or a stand-in it started would outlive it, holding its port or running forever.
 */
export function endsWithThisProcess<T extends ChildProcess>(child: T): T {
  const forget = onExit(() => void child.kill('SIGKILL'))
  child.once('exit', () => forget())
  return child
}

/** Closes a node HTTP server and its open connections. */
export function closeServer(server: { closeAllConnections(): void; close(done: () => void): unknown }): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })
}

/** A port held by another server until the test ends. */
export async function takenPort(t: Test): Promise<number> {
  const server = createServer()
  const port = await listenOnLoopback(server)
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return port
}

/**
 * Where `freePort` draws from: below the kernel's ephemeral range, from which every `listen(0)` and every outgoing
 * connection of the suite takes its port, so that none of them takes a port between `freePort` and the child's bind.
 */
const EPHEMERAL_LOW = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0])
  } catch {
    // Linux's default range; elsewhere only a collision's chance changes.
    return 32768
  }
})()
const DRAWN_LOW = 10_000
const FETCH_BAD_PORT = 10080
/** The ports this process has handed out: two draws never give the same one. */
const handedOut = new Set<number>()

/**
 * A port that was free a moment ago, for a child process that must be told its ports up front: drawn at random below
 * the ephemeral range (port 0's range where there is no room below it), and checked by listening on it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port =
      EPHEMERAL_LOW - DRAWN_LOW > 1000 ? DRAWN_LOW + Math.floor(Math.random() * (EPHEMERAL_LOW - DRAWN_LOW)) : 0
    const server = createNetServer()
    const bound = await new Promise<number | undefined>((resolve) => {
      server.once('error', () => resolve(undefined))
      server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port))
    })
    if (bound === undefined) continue
    await new Promise((resolve) => server.close(resolve))
    // The one Fetch "bad port" in the range: the tests' fetch (poll) would refuse it.
    if (handedOut.has(bound) || bound === FETCH_BAD_PORT) continue
    handedOut.add(bound)
    return bound
  }
}

/** Whether something accepts a connection on the loopback port now; a silent port counts as no after 500 ms. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection(port, '127.0.0.1')
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.on('error', () => done(false))
    socket.on('connect', () => done(true))
  })
}

/** Polls until `url` answers `status`; bounded (a child process under the TypeScript loader starts slowly). */
export async function poll(url: string, status: number): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    const got = await fetch(url).then(
      (res) => res.status,
      () => 0,
    )
    if (got === status) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`${url} never answered ${status}`)
}

/** A node server for `handler` on a free loopback port, with a keep-alive agent; both closed when the test ends. */
export async function serveOnLoopback(
  t: Test,
  handler: RequestListener,
): Promise<{ server: Server; port: number; agent: Agent }> {
  const server = createServer(handler)
  const port = await listenOnLoopback(server)
  const agent = new Agent({ keepAlive: true })
  t.teardown(() => {
    agent.destroy()
    return closeServer(server)
  })
  return { server, port, agent }
}

export interface Received {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly rawHeaders: string[]
  readonly body: Buffer
}

export type Answer = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void

export interface Backend {
  readonly server: Server
  readonly url: string
  /** Every request the backend received in full, in order. */
  readonly received: Received[]
  /** Requests whose head arrived, whether or not their body did. */
  readonly started: number
  /** How the next requests are answered. */
  answer: Answer
  close(): Promise<void>
}

export const created: Answer = (_req, res) => {
  const body = JSON.stringify({ outcome: 'authorized', _links: { self: { href: '/payments/1' } } })
  res.writeHead(201, { 'content-type': 'application/vnd.example.payments-v6.hal+json', 'set-cookie': ['a=1', 'b=2'] })
  res.end(body)
}

/** A real HTTP backend on loopback that records what reaches it; a `port` to come back on the same one after a close. */
export async function startBackend(answer: Answer = created, port = 0): Promise<Backend> {
  const received: Received[] = []
  let started = 0
  const server = createServer((req, res) => {
    started++
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      received.push({
        method: req.method as string,
        url: req.url as string,
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
      })
      backend.answer(req, res, body)
    })
  })
  const backend: Backend = {
    server,
    url: `http://127.0.0.1:${await listenOnLoopback(server, port)}`,
    received,
    get started() {
      return started
    },
    answer,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
  return backend
}

export interface RawRequest {
  readonly head: string
  readonly body: Buffer
  /** Which connection it came on, counted from 0. */
  readonly connection: number
  /** Which request of that connection it is, counted from 0. */
  readonly index: number
}

/** Called when a request's head arrived (its body may still be on its way). */
export type OnHead = (socket: Socket, connection: number) => void
/** Called when a whole request arrived: write an answer, or misbehave. */
export type RawAnswer = (socket: Socket, request: RawRequest) => void

export interface RawBackend {
  readonly url: string
  /** Requests received whole, in order. */
  readonly requests: RawRequest[]
  /** Request heads received, whether or not their body followed. */
  readonly heads: number
  /** Connections accepted. */
  readonly connections: number
  /** Connections open now. */
  readonly open: number
  /** Connections the other side (the gateway) closed first. */
  readonly closedByGateway: number
  /** The sockets still open, to misbehave on. */
  readonly sockets: Set<Socket>
  answer: RawAnswer
  onHead: OnHead | undefined
}

/** `HTTP/1.1 201` with a short JSON body and `extra` header lines, as the raw backend writes it. */
export function createdBytes(extra = ''): string {
  const body = '{"outcome":"authorized"}'
  return `HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`
}

/**
 * A backend written on `net`, to misbehave in ways node's HTTP server never
 * does: cut a connection at a chosen byte, close an idle one, answer and
 * close. It parses only what a forwarded payment looks like (a head, then a
 * `Content-Length` body). Closed when the test ends.
 */
export async function startRawBackend(
  t: Test,
  answer: RawAnswer = (socket) => socket.write(createdBytes()),
): Promise<RawBackend> {
  const requests: RawRequest[] = []
  const sockets = new Set<Socket>()
  let heads = 0
  let connections = 0
  let closedByGateway = 0
  const server = createNetServer({ allowHalfOpen: true }, (socket) => {
    const connection = connections++
    sockets.add(socket)
    let buffered = Buffer.alloc(0)
    let headSeen = false
    let index = 0
    socket.on('end', () => {
      // Half-open allowed, so that this tells who closed first: an end not yet written here is the gateway's.
      if (!socket.writableEnded) closedByGateway++
      socket.end()
    })
    socket.on('error', () => undefined)
    socket.on('close', () => sockets.delete(socket))
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      for (;;) {
        const at = buffered.indexOf('\r\n\r\n')
        if (at === -1) return
        if (!headSeen) {
          headSeen = true
          heads++
          backend.onHead?.(socket, connection)
          if (socket.destroyed) return
        }
        const head = buffered.subarray(0, at).toString('latin1')
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
        if (buffered.length < at + 4 + length) return
        const body = buffered.subarray(at + 4, at + 4 + length)
        buffered = buffered.subarray(at + 4 + length)
        headSeen = false
        const request = { head, body, connection, index: index++ }
        requests.push(request)
        backend.answer(socket, request)
      }
    })
  })
  const port = await listenOnLoopback(server)
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  )
  const backend: RawBackend = {
    url: `http://127.0.0.1:${port}`,
    requests,
    get heads() {
      return heads
    },
    get connections() {
      return connections
    },
    get open() {
      return sockets.size
    },
    get closedByGateway() {
      return closedByGateway
    },
    sockets,
    answer,
    onHead: undefined,
  }
  return backend
}
