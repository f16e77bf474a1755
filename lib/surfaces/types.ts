/**
 * The middleware's public types, written without any framework's: the package's declarations from
 * `payments-gate` compile in a project that has none of Express, Fastify or Hono (docs/middleware.md,
 * types). Each shape is assignable to the framework's own (Express's `RequestHandler`, Fastify's
 * `FastifyPluginCallback`, Hono's `MiddlewareHandler`); the types that need a framework's are in the
 * entry points `payments-gate/fastify` and `payments-gate/hono`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { PaymentRequest } from '../schema/payment.js'
import type { GateContext, GateReport } from './shared.js'

declare global {
  // Express's own way to extend its request type: @types/express's `Request` extends this interface of the global
  // namespace, so `req.paymentsGate` is typed wherever `payments-gate` is imported, and declaring it needs no Express.
  namespace Express {
    interface Request {
      /** Set by the payments-gate middleware on a request that passed every check. */
      paymentsGate?: GateContext
      /** In report mode, set on every payment passed on: its entity read, and the user's (docs/rollout.md). */
      paymentsGateReport?: GateReport
    }
  }
}

/** What the Express middleware reads and sets of a request: node's, with the target Express (or Connect) keeps whole. */
export interface ExpressRequest extends IncomingMessage, Express.Request {
  /** The request target from the server's root, which Express never shortens. */
  readonly originalUrl: string
  /** The path the router was mounted on, which Express takes off `url` (empty for the app itself; unset by Connect). */
  readonly baseUrl?: string
  /** The route Express matched, once one did: set only inside a route's handlers. */
  readonly route?: unknown
  /** Express's path below the mount point, for the log. */
  readonly path?: string
  /** The validated, rewritten document, once the request passed. */
  body?: unknown
}

/** The `next` of Connect and Express middleware. */
export type ExpressNext = (error?: unknown) => void

/** `gate.express()`: Connect/Express middleware, mounted before any body parser. */
export type ExpressMiddleware = (req: ExpressRequest, res: ServerResponse, next: ExpressNext) => void

/** `gate.expressErrorHandler()`: Express error-handling middleware (four parameters), mounted last. */
export type ExpressErrorMiddleware = (
  error: unknown,
  req: ExpressRequest,
  res: ServerResponse,
  next: ExpressNext,
) => void

export interface FastifyGateOptions {
  /**
   * Also install an error handler that answers errors thrown by route
   * handlers with the standard 500 `internalErrorOccurred` body (errors with a
   * 4xx status go on to Fastify's default handler). It applies to the
   * instance the plugin is registered on and its children, unless they set
   * their own. Default false.
   */
  errorHandler?: boolean
}

/**
 * `gate.fastify`: the Fastify plugin, for `app.register(gate.fastify)`. Fastify calls it with its instance,
 * whose type is Fastify's to declare: any value is taken here, so Fastify's is.
 */
export type FastifyGatePlugin = (instance: unknown, options: FastifyGateOptions, done: (error?: Error) => void) => void

/**
 * What retry protection uses of Hono's `Context` once the handler ran: the error Hono caught and the
 * answer, which it replaces. Written here so that the package's declarations need no Hono types.
 */
export interface HonoAnswer {
  readonly error: unknown
  get res(): Response
  set res(answer: Response | undefined)
}

/** `gate.hono()`: Hono middleware, on the Fetch API's `Request` and `Response`; its context's type is Hono's. */
export type HonoGateMiddleware = (c: unknown, next: () => Promise<void>) => Promise<Response | void>

/**
 * The input of a Hono handler behind the middleware, for `Context<Env, Path, PaymentsGateInput>`: Hono types
 * `c.req.valid('json')` only from validators given on the route itself (docs/middleware.md, Hono).
 */
export interface PaymentsGateInput {
  in: object
  out: { json: PaymentRequest }
}
