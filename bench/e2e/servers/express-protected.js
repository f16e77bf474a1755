// (mx), (mx0): the sale to an Express 5 route behind the gate's middleware, whose handler answers 201 itself
// (nothing forwarded), with retry protection around the handler (BENCH_IDEMPOTENCY: memory, or a redis://
// URL) or off. mx0/mx is what protecting the handler costs (docs/middleware.md, retry protection).
import { createServer } from 'node:http'
import express from 'express'
import { SALE_PATH } from '../../lib/fixtures.js'
import { buildGate, fromEnv } from '../../lib/gateway.js'
import { serve } from './child.js'

const gate = await buildGate(fromEnv())
const app = express()
app.use(gate.express())
const created = { outcome: 'authorized' }
app.post(SALE_PATH, (_req, res) => res.status(201).json(created))
app.use(gate.expressErrorHandler())
await serve(createServer(app))
