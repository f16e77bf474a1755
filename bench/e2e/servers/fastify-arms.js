// The Fastify arms (BENCH_ARM): the same sale posted to a Fastify 5 route that answers 201 itself, nothing
// forwarded, so that the four arms differ only in what screens the request:
//   plain    Fastify's JSON parser for the v6 media type, no checks
//   schema   ... and the request schema of `payments-gate openapi` on the route (Fastify's Ajv, `luhn` format)
//   auth     ... and a cached BasicAuth check in an onRequest hook: SHA-256 of the header, compared in
//            constant time with the digest of the one good header (what a team would write by hand)
//   plugin   the payments-gate plugin (`gate.fastify`) instead: every check of the gate, no route schema
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer } from 'node:http'
import Fastify from 'fastify'
import { luhnValid } from '../../../dist/luhn.js'
import { buildOpenApi } from '../../../dist/openapi.js'
import { AUTHORIZATION, CONTENT_TYPE, SALE_PATH } from '../../lib/fixtures.js'
import { buildGate, fromEnv } from '../../lib/gateway.js'
import { serve } from './child.js'

const BODY_LIMIT = 65536
const ARMS = ['plain', 'schema', 'auth', 'plugin']
const arm = process.env.BENCH_ARM
if (!ARMS.includes(arm)) throw new Error(`BENCH_ARM: expected one of ${ARMS.join(', ')}, got ${arm}`)

let server
const app = Fastify({
  bodyLimit: BODY_LIMIT,
  serverFactory: (handler) => (server = createServer(handler)),
  // The document carries OpenAPI annotations (x-format, x-error) that Ajv's strict mode would refuse.
  ajv: { customOptions: { strict: false }, plugins: [(ajv) => ajv.addFormat('luhn', luhnValid)] },
})

if (arm === 'plugin') {
  await app.register((await buildGate({ ...fromEnv(), idempotency: 'off' })).fastify)
} else {
  app.addContentTypeParser(
    CONTENT_TYPE,
    { parseAs: 'string', bodyLimit: BODY_LIMIT },
    app.getDefaultJsonParser('error', 'error'),
  )
}

if (arm === 'auth') {
  const digest = (header) => createHash('sha256').update(header).digest()
  const good = digest(AUTHORIZATION)
  const denied = { errorName: 'accessDenied', message: 'Access denied.' }
  app.addHook('onRequest', (request, reply, done) => {
    const header = request.headers.authorization
    if (typeof header === 'string' && timingSafeEqual(digest(header), good)) return done()
    reply.code(401).header('www-authenticate', 'Basic realm="payments"').send(denied)
  })
}

let schema
if (arm === 'schema' || arm === 'auth') {
  const openapi = buildOpenApi({ vendor: 'example' })
  const name = openapi.paths[SALE_PATH].post.requestBody.content[CONTENT_TYPE].schema.$ref.split('/').at(-1)
  // The components go along, so that the schema's `#/components/schemas/...` references resolve.
  schema = { body: { ...openapi.components.schemas[name], components: openapi.components } }
}

const created = { outcome: 'authorized' }
app.post(SALE_PATH, { schema }, (_request, reply) => reply.code(201).send(created))
await app.ready()
await serve(server)
