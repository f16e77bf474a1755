/**
 * A typed Hono app as docs/middleware.md writes one (test/as-packed.test.ts runs the example itself), compiled by
 * `tsc -p .` and served by test/surfaces/hono.test.ts: the gate given to `app.use`, so its types reach the routes
 * only through the `ContextVariableMap` augmentation of `payments-gate/hono`, and `PaymentsGateInput` for
 * `c.req.valid('json')`.
 */
import type { Server } from 'node:http'
import { createAdaptorServer } from '@hono/node-server'
import { Hono, type Context, type Env } from 'hono'
import type { Test } from 'tap'
import type { PaymentsGateInput } from '../../lib/hono.js'
import type { Gate, PaymentRequest } from '../../lib/index.js'
import { OTHER_PATH, RECURRING_PATH, SALE_PATH } from './fixtures.js'
import { closeServer, listenOnLoopback } from './servers.js'
import type { Echo } from './surfaces.js'

/** A handler behind the gate: the rewritten document and the context, typed. */
type Payment = Context<Env, string, PaymentsGateInput>

/** The echo application of test/helpers/surfaces.ts on Hono; `onHandled` is called by each route. */
export function honoApp(gate: Gate, onHandled: () => void = () => {}): Hono {
  const app = new Hono()
  app.use('/payments/*', gate.hono())
  const echo = (c: Payment) => {
    onHandled()
    const context = c.get('paymentsGate')
    if (context === undefined) return c.text('not checked', 500)
    const document: PaymentRequest = c.req.valid('json')
    const body: Echo = {
      document,
      operation: context.operation,
      entity: context.entity,
      username: context.principal.username,
      requestId: context.requestId,
    }
    return c.json(body, 201)
  }
  app.post(SALE_PATH, echo)
  app.post(RECURRING_PATH, echo)
  app.get(OTHER_PATH, (c) => (onHandled(), c.text('other')))
  return app
}

/** A Hono application on @hono/node-server on a free loopback port, closed when the test ends. */
export async function serveHono(t: Test, app: Hono): Promise<number> {
  return (await honoServer(t, app)).port
}

/** `serveHono`, with the node server under the adaptor. */
export async function honoServer(t: Test, app: Hono): Promise<{ server: Server; port: number }> {
  // Without `createServer` in its options the adaptor makes a node:http server.
  const server = createAdaptorServer({ fetch: app.fetch }) as Server
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  return { server, port }
}
