// (e) What a user would pick instead: Express 5, express-openapi-validator on
// the document `payments-gate openapi` prints, forwarding with
// http-proxy-middleware over a keep-alive pool. It checks the schema only:
// no password check, no policies, no rewrites.
import { Agent, createServer } from 'node:http'
import express from 'express'
import * as OpenApiValidator from 'express-openapi-validator'
import { createProxyMiddleware, fixRequestBody } from 'http-proxy-middleware'
import { luhnValid } from '../../../dist/luhn.js'
import { buildOpenApi } from '../../../dist/openapi.js'
import { CONTENT_TYPE } from '../../lib/fixtures.js'
import { serve, target } from './child.js'

const app = express()
app.use(express.json({ type: CONTENT_TYPE, limit: '64kb' }))
app.use(
  OpenApiValidator.middleware({
    apiSpec: buildOpenApi({ vendor: 'example' }),
    validateRequests: true,
    validateResponses: false,
    formats: { luhn: { type: 'string', validate: luhnValid } },
  }),
)
app.use(
  createProxyMiddleware({
    target: target(),
    agent: new Agent({ keepAlive: true, maxSockets: 256 }),
    xfwd: true,
    // The body was parsed for the validator: send it on again.
    on: { proxyReq: fixRequestBody },
  }),
)
app.use((error, _req, res, _next) => {
  res
    .status(error.status ?? 500)
    .json({ errorName: 'bodyDoesNotMatchSchema', message: error.message, validationErrors: error.errors })
})
await serve(createServer(app))
