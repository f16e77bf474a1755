// (mf), (mf0): the sale to a Fastify 5 route behind the gate's plugin, whose handler answers 201 itself
// (nothing forwarded), with retry protection around the handler (BENCH_IDEMPOTENCY: memory, or a redis://
// URL) or off. mf0/mf is what protecting the handler costs (docs/middleware.md, retry protection).
import { createServer } from 'node:http'
import Fastify from 'fastify'
import { SALE_PATH } from '../../lib/fixtures.js'
import { buildGate, fromEnv } from '../../lib/gateway.js'
import { serve } from './child.js'

let server
const app = Fastify({ serverFactory: (handler) => (server = createServer(handler)) })
await app.register((await buildGate(fromEnv())).fastify)
const created = { outcome: 'authorized' }
app.post(SALE_PATH, (_request, reply) => reply.code(201).send(created))
await app.ready()
await serve(server)
