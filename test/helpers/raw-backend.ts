import { createServer, type AddressInfo, type Socket } from 'node:net'
import type { Test } from 'tap'

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

/** `HTTP/1.1 201` with a short JSON body and `extra` header lines. */
export function created(extra = ''): string {
  const body = '{"outcome":"authorized"}'
  return `HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`
}

/**
 * A backend written on `net`, to misbehave in ways node's HTTP server never
 * does: cut a connection at a chosen byte, close an idle one, answer and
 * close. It parses only what a forwarded payment looks like (a head, then a
 * `Content-Length` body). Closed when the test ends.
 */
export async function startRawBackend(t: Test, answer: RawAnswer = (socket) => socket.write(created())): Promise<RawBackend> {
  const requests: RawRequest[] = []
  const sockets = new Set<Socket>()
  let heads = 0
  let connections = 0
  let closedByGateway = 0
  const server = createServer({ allowHalfOpen: true }, (socket) => {
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  )
  const backend: RawBackend = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
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
