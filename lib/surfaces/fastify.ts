import type { IncomingMessage } from 'node:http'
import type { FastifyError, FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify'
import type { Checks } from '../checks/index.js'
import type { Rejection } from '../errors.js'
import { answerOf, type Answer } from '../http/answer.js'
import { inTurn } from '../http/pipelining.js'
import { ABORTED, readBody } from '../http/read-body.js'
import { screenBody, screenHead, unreadReport, type Admitted } from '../http/screen.js'
import { registeredTracer } from '../tracing.js'
import { contextOf, endScreening, internalError, isClientError, passedAsItCame, startScreening, type GateContext, type GateLogger, type GateReport, type Screening } from './shared.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the payments-gate plugin on a request that passed every check. */
    paymentsGate?: GateContext
    /** In report mode, set on every request of the two operations that passed BasicAuth (docs/rollout.md). */
    paymentsGateReport?: GateReport
  }
}

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

/** Writes an answer through Fastify: the same status, headers and bytes as every other surface. */
function write(reply: FastifyReply, answer: Answer): FastifyReply {
  // A Buffer body, so Fastify does not append `; charset=utf-8` to the JSON type as it does for a string.
  return reply.code(answer.status).headers(answer.headers).send(answer.body)
}

/**
 * A body that could not be read, as an error for Fastify: the client left
 * before it was complete (nobody is listening any more), or it was too large
 * for another route of the application.
 */
function bodyError(outcome: Rejection | typeof ABORTED): Error {
  return outcome === ABORTED
    ? Object.assign(new Error('payments-gate: the client aborted the request body'), { statusCode: 400 })
    : Object.assign(new Error(outcome.body.message), { statusCode: outcome.status })
}

/**
 * The Fastify plugin. It skips encapsulation (as fastify-plugin would), so
 * its hooks and its content-type parser apply to the instance it is
 * registered on. Credentials and headers are checked in `onRequest`, before
 * the body is read; the body is read and checked by a content-type parser for
 * the v6 media type, so Fastify never parses it a second time; a refused body
 * is answered in `preValidation`, before any route schema or handler.
 */
export function fastifyPlugin(checks: Checks, logger?: GateLogger): FastifyPluginCallback<FastifyGateOptions> {
  const admitted = new WeakMap<FastifyRequest, Admitted>()
  const refused = new WeakMap<FastifyRequest, Rejection>()
  const screenings = new WeakMap<FastifyRequest, Screening>()
  const tracer = registeredTracer()
  const internal = (reply: FastifyReply, error: unknown): FastifyReply => write(reply, internalError(error, logger))

  const plugin: FastifyPluginCallback<FastifyGateOptions> = (fastify, options, done) => {
    fastify.decorateRequest('paymentsGate', undefined)
    fastify.decorateRequest('paymentsGateReport', undefined)
    const jsonParser = fastify.getDefaultJsonParser('error', 'error')

    fastify.addHook('onRequest', async (request, reply) => {
      await new Promise<void>((resolve) => inTurn(reply.raw, resolve))
      const operation = checks.operationOf(request.raw.url)
      if (operation === undefined) return
      const screening = startScreening(tracer, operation, request.raw, reply.raw)
      let head
      try {
        // Never undefined: the path is an operation's.
        head = (await screenHead(checks, request.raw, operation)) as Exclude<Awaited<ReturnType<typeof screenHead>>, undefined>
      } catch (error) {
        endScreening(screening, 500)
        return internal(reply, error)
      }
      if (!head.ok) {
        endScreening(screening, head)
        return write(reply, answerOf(head))
      }
      if (head.ok === 'report') {
        endScreening(screening, head)
        request.paymentsGateReport = head
        return
      }
      // Report mode: a refused head is reported at once, since a body of another Content-Type than the v6
      // one goes to Fastify's own parser; the parser below reports a v6 body again, with its entity.
      if (head.refused !== undefined) request.paymentsGateReport = unreadReport(head.operation, head.principal, head.refused)
      admitted.set(request, head)
      screenings.set(request, screening)
    })

    fastify.addContentTypeParser(checks.mediaTypes.request, async (request: FastifyRequest, payload: IncomingMessage) => {
      const head = admitted.get(request)
      if (head === undefined) {
        // Another route of the application that takes the v6 media type: plain JSON, as Fastify would parse it.
        const bytes = await readBody(payload, checks.bodyLimit)
        if (!Buffer.isBuffer(bytes)) throw bodyError(bytes)
        return new Promise((resolve, reject) => void jsonParser(request, bytes.toString('utf8'), (error, body) => (error === null ? resolve(body) : reject(error))))
      }
      const outcome = await screenBody(checks, payload, head)
      const screening = screenings.get(request) as Screening
      endScreening(screening, outcome === ABORTED ? 0 : outcome)
      if (outcome === ABORTED) throw bodyError(ABORTED)
      if (!outcome.ok) {
        refused.set(request, outcome)
        return undefined
      }
      if (outcome.ok === true) {
        request.paymentsGate = contextOf(outcome, screening)
        return outcome.document
      }
      request.paymentsGateReport = outcome
      const passed = passedAsItCame(outcome)
      if (passed !== undefined) request.paymentsGate = contextOf(passed, screening)
      return outcome.received
    })

    fastify.addHook('preValidation', async (request, reply) => {
      const outcome = refused.get(request)
      if (outcome !== undefined) return write(reply, answerOf(outcome))
    })

    if (options.errorHandler === true) {
      fastify.setErrorHandler((error: FastifyError, _request, reply) => (isClientError(error) ? reply.send(error) : internal(reply, error)))
    }
    done()
  }
  return Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'payments-gate' })
}
