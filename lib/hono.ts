/**
 * `payments-gate/hono`: the types a Hono application needs beside `payments-gate`'s, kept apart because they
 * need Hono's (docs/middleware.md, Hono). Importing it, even as `import type`, types `c.get('paymentsGate')`
 * and `c.get('paymentsGateReport')` in every app; `PaymentsGateInput` types `c.req.valid('json')`.
 */
export type { PaymentsGateInput } from './surfaces/hono.js'
export type { HonoGateMiddleware } from './surfaces/types.js'
