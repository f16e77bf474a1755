/**
 * `payments-gate/fastify`: the types a Fastify application needs beside `payments-gate`'s, kept apart because
 * they need Fastify's (docs/middleware.md, Fastify). Importing it, even as `import type`, types
 * `request.paymentsGate` and `request.paymentsGateReport` on every Fastify request; `PaymentsGateRoute` types
 * `request.body` on a route behind the plugin.
 */
export type { PaymentsGateRoute } from './surfaces/fastify.js'
export type { FastifyGateOptions, FastifyGatePlugin } from './surfaces/types.js'
