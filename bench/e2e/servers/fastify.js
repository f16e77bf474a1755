// (f) The peer a Node team would assemble from the fastest parts: Fastify 5, a JSON schema on each of
// the two routes (Fastify compiles it with Ajv), taken from the OpenAPI document `payments-gate openapi`
// prints, and forwarding with @fastify/reply-from on its undici path (a keep-alive pool). It checks the
// schema only: no password check, no policies, no rewrites, and Fastify's own request logs stay off.
import { createServer } from 'node:http'
import replyFrom from '@fastify/reply-from'
import Fastify from 'fastify'
import { luhnValid } from '../../../dist/luhn.js'
import { buildOpenApi } from '../../../dist/openapi.js'
import { CONTENT_TYPE } from '../../lib/fixtures.js'
import { serve, target } from './child.js'

const BODY_LIMIT = 65536
const openapi = buildOpenApi({ vendor: 'example' })

let server
const app = Fastify({
  bodyLimit: BODY_LIMIT,
  serverFactory: (handler) => (server = createServer(handler)),
  // The document carries OpenAPI annotations (x-format, x-error) that Ajv's strict mode would refuse.
  ajv: { customOptions: { strict: false }, plugins: [(ajv) => ajv.addFormat('luhn', luhnValid)] },
})
// Fastify's own JSON parser (secure-json-parse) for the vendor media type.
app.addContentTypeParser(
  CONTENT_TYPE,
  { parseAs: 'string', bodyLimit: BODY_LIMIT },
  app.getDefaultJsonParser('error', 'error'),
)
// The parsed document is sent on re-serialized, as the gateway does.
await app.register(replyFrom, {
  base: target(),
  contentTypesToEncode: [CONTENT_TYPE],
  undici: { connections: 256, pipelining: 1 },
})

for (const [path, { post }] of Object.entries(openapi.paths)) {
  const name = post.requestBody.content[CONTENT_TYPE].schema.$ref.split('/').at(-1)
  // The components go along, so that the schema's `#/components/schemas/...` references resolve.
  const body = { ...openapi.components.schemas[name], components: openapi.components }
  app.post(path, { schema: { body } }, (_request, reply) => reply.from())
}
await app.ready()
await serve(server)
