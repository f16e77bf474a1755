import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

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
      received.push({ method: req.method as string, url: req.url as string, headers: req.headers, rawHeaders: req.rawHeaders, body })
      backend.answer(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  const backend: Backend = {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
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
