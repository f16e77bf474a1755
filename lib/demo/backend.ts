import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import { maskCardNumbers } from '../card-mask.js'
import { reject } from '../errors.js'
import { answerOf, writeAnswer } from '../http/answer.js'
import { listen } from '../http/listen.js'
import { OPERATION_PATHS } from '../schema/payment.js'

export interface DemoBackend {
  readonly server: Server
  readonly url: string
  close(): Promise<void>
}

const HAL = 'application/vnd.example.payments-v6.hal+json'
const PATHS = new Set(Object.values(OPERATION_PATHS))

/**
 * A stand-in for the payments service, for `payments-gate demo`: it accepts
 * every payment the gateway lets through with a 201 and echoes the document it
 * received (card number masked), so the rewrites can be seen. `onAcceptError` is told of a connection its
 * listener could not accept (lib/http/listen.ts).
 */
export async function startDemoBackend(onAcceptError: (error: Error) => void): Promise<DemoBackend> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const path = (req.url as string).split('?')[0] as string
      if (req.method !== 'POST' || !PATHS.has(path)) {
        const body = JSON.stringify({
          errorName: 'resourceNotFound',
          message: 'The demo backend only knows the two payment operations.',
        })
        res.writeHead(404, { 'content-type': 'application/json' }).end(body)
        return
      }
      let received: unknown
      try {
        received = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {
        // The gateway forwards only valid documents; anything else on its loopback port is answered, not thrown.
        writeAnswer(res, answerOf(reject('bodyIsNotJson')))
        return
      }
      const id = randomUUID()
      const body = maskCardNumbers(
        JSON.stringify({
          outcome: 'authorized',
          paymentId: id,
          receivedByBackend: received,
          _links: { self: { href: `/payments/events/${id}` } },
        }),
      )
      res.writeHead(201, { 'content-type': HAL, 'content-length': Buffer.byteLength(body) }).end(body)
    })
  })
  const { port } = await listen(server, 0, '127.0.0.1', onAcceptError)
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
