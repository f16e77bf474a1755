import type { Readable } from 'node:stream'
import type { Rejection } from '../errors.js'
import { checkSize } from '../checks/body.js'

/** The client went away before its body was complete: nothing to answer, nothing to forward. */
export const ABORTED = Symbol('aborted')

/**
 * Reads a request body once, counting bytes as they arrive and stopping at
 * the limit (a chunked body declares no size). Any readable will do: Fastify
 * hands its parsers the request, or a stream a preParsing hook put in its place. A body that stops short, because
 * the client aborted or its connection failed, is never handed on.
 */
export function readBody(req: Readable, limit: number): Promise<Buffer | Rejection | typeof ABORTED> {
  // The client may leave while a slow check (a password hash) runs: its `close` has then been emitted already.
  if (req.destroyed) return Promise.resolve(ABORTED)
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    const finish = (outcome: Buffer | Rejection | typeof ABORTED) => {
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('close', onAbort)
      // The error listener stays, a no-op once settled: node's request emits `error` only to a listener, but other
      // streams (a Fetch body through `Readable.fromWeb`, a preParsing hook's) emit it regardless, and a body left
      // unread past the limit may still fail when its client resets: unheard, that error would end the process.
      resolve(outcome)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        req.pause()
        finish(checkSize(size, limit) as Rejection)
      } else {
        chunks.push(chunk)
      }
    }
    const onEnd = () => finish(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size))
    const onAbort = () => finish(ABORTED)
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onAbort)
    req.on('close', onAbort)
  })
}
