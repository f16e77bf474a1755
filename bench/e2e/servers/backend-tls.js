// (cb)'s backend: (a) over TLS, with the bench's own certificate (BENCH_TLS_CERT, BENCH_TLS_KEY).
import { readFileSync } from 'node:fs'
import { createServer } from 'node:https'
import { serve } from './child.js'

const ANSWER = JSON.stringify({
  outcome: 'authorized',
  transactionReference: 'order-2024-000187',
  _links: { self: { href: '/payments/events/1' } },
})

const server = createServer(
  { cert: readFileSync(process.env.BENCH_TLS_CERT), key: readFileSync(process.env.BENCH_TLS_KEY) },
  (req, res) => {
    req.on('data', () => {})
    req.on('end', () => {
      res.writeHead(201, {
        'content-type': 'application/vnd.example.payments-v6.hal+json',
        'content-length': Buffer.byteLength(ANSWER),
      })
      res.end(ANSWER)
    })
  },
)
await serve(server)
