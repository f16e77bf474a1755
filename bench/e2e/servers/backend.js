// (a) The backend: reads the whole body, answers 201 with a small JSON body.
import { createServer } from 'node:http'
import { serve } from './child.js'

const ANSWER = JSON.stringify({
  outcome: 'authorized',
  transactionReference: 'order-2024-000187',
  _links: { self: { href: '/payments/events/1' } },
})

const server = createServer((req, res) => {
  req.on('data', () => {})
  req.on('end', () => {
    res.writeHead(201, {
      'content-type': 'application/vnd.example.payments-v6.hal+json',
      'content-length': Buffer.byteLength(ANSWER),
    })
    res.end(ANSWER)
  })
})
await serve(server)
